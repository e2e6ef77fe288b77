"""Timeline benchmark: a recorded run of 10,000 rollouts, its timeline (`w`) opened and zoomed.

The recording is written in the documented format by a small dispatcher (64 in flight over
four servers, the limit changed and dispatch paused along the way, rollouts taking 2 to 60
s), then replayed in a headless dashboard at 160×45 played to its end. Reported, each the
median of repeated measurements: the time from pressing `w` until the screen holding the
timeline has been drawn (the recording's time line made on first use, its lines drawn, the
table filtered to the cursor's rollouts), and the time for a zoom (`i`, then `o`) to be
drawn again: from its key to the screen drawn (Pilot's own wait included), and from the zoom
to the pane's lines drawn (the redraw itself). Beside them, without the app: building the
model from the recording's events, and a live board of 10,000 rollouts followed at its
first update (the catch-up) and at an update after 500 changes.

`python -m bench.timeline` prints one JSON line (`--rollouts`, `--repeats`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from core.board import RolloutBoard
from core.eval.timeline.followed import BoardTimeline
from core.eval.timeline.recorded import timeline_of_recording
from core.types import RolloutStatus
from tui.app import DashboardApp, create_app
from tui.sources.replay import ReplaySource

SIZE = (160, 45)
SERVERS = ("host-a", "host-b", "host-c", "host-d")


def write_run(folder: Path, rollouts: int, seed: int = 26) -> Path:
    """A transitions.jsonl of `rollouts` rollouts: 64 in flight (48 from a third of the way,
    none sent for a minute at half way), each queued, running (its server's report), then
    ended; one in 20 fails."""
    rng = random.Random(seed)
    lines: list[dict[str, Any]] = [{"kind": "session", "t": 0.0},
                                   {"kind": "dispatch", "max_in_flight": 64, "t": 0.0}]  # fmt: skip
    slots: list[float] = [0.0] * 64
    for n in range(rollouts):
        slot = min(range(len(slots)), key=slots.__getitem__)
        start = slots[slot]
        if n == rollouts // 3:
            lines.append({"kind": "control", "action": "max_in_flight", "value": 48, "t": start})
            slots = sorted(slots)[:48]
            slot = 0
        if n == rollouts // 2:
            lines.append({"kind": "control", "action": "pause", "t": start})
            lines.append({"kind": "control", "action": "resume", "t": start + 60.0})
            slots = [max(s, start + 60.0) for s in slots]
            start = slots[slot]
        end = start + rng.uniform(2.0, 60.0)
        rid = f"{n:032x}"
        row = {"rollout_id": rid, "row_index": n, "run_index": 0, "source_row_index": n}
        status = "failure" if n % 20 == 7 else "success"
        lines += [
            {"kind": "status", **row, "status": "queued", "t": start, "grade": True},
            {"kind": "status", **row, "status": "running", "t": start + 0.2, "source": "server",
             "server_id": SERVERS[n % len(SERVERS)], "server_time": "2026-03-01T12:00:00Z"},
            {"kind": "status", **row, "status": status, "t": end},
        ]  # fmt: skip
        slots[slot] = end
    lines.sort(key=lambda line: line["t"])
    path = folder / "transitions.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def _drawn(app: DashboardApp) -> None:
    """Until everything pending is handled, then the whole screen composed, as a terminal
    would be sent it."""
    await asyncio.sleep(0)
    app.screen._compositor.render_strips()


async def open_and_zoom(
    path: Path, zooms: int
) -> tuple[float, list[float], list[float], list[float]]:
    """Seconds from `w` to the screen drawn with the timeline; seconds for each zoom, from
    its key to the screen drawn, and from the zoom to the pane's lines drawn again; seconds
    from a key that changes nothing (`z` on the whole run) to the screen drawn: what Pilot
    and the screen cost without the timeline."""
    source = ReplaySource(path)
    source.to_end()
    app = create_app(source, clock=source.clock, start_work=False)
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        started = time.perf_counter()
        await pilot.press("w")
        await pilot.pause()
        await _drawn(app)
        opened = time.perf_counter() - started
        assert app.timeline_pane.has_class("-open")
        zoomed = []
        for index in range(zooms):
            started = time.perf_counter()
            await pilot.press("i" if index % 2 == 0 else "o")
            await pilot.pause()
            await _drawn(app)
            zoomed.append(time.perf_counter() - started)
        idle = []
        for _ in range(zooms):
            started = time.perf_counter()
            await pilot.press("z")
            await pilot.pause()
            await _drawn(app)
            idle.append(time.perf_counter() - started)
        pane = app.timeline_pane
        redrawn = []
        for index in range(zooms):
            started = time.perf_counter()
            pane.action_zoom(1 if index % 2 == 0 else -1)
            for y in range(pane.size.height):
                pane.render_line(y)
            redrawn.append(time.perf_counter() - started)
    return opened, zoomed, redrawn, idle


def live_updates(rollouts: int) -> tuple[float, float]:
    """Seconds for a board of `rollouts` finished rollouts followed at its first update, and
    for an update after 500 of them changed."""
    board = RolloutBoard()
    board.started_at = 0.0
    for n in range(rollouts):
        rid = f"{n:032x}"
        board.observe(rid, RolloutStatus.QUEUED, n * 0.01, row_index=n, run_index=0)
        if n < rollouts - 600:
            board.observe(rid, RolloutStatus.SUCCESS, n * 0.01 + 5.0)
    follower = BoardTimeline(board)
    started = time.perf_counter()
    follower.update(rollouts * 0.01 + 10.0).peaks(0.0, rollouts * 0.01 + 10.0, 150)
    first = time.perf_counter() - started
    for n in range(rollouts - 600, rollouts - 100):
        board.observe(f"{n:032x}", RolloutStatus.SUCCESS, rollouts * 0.01 + 11.0)
    started = time.perf_counter()
    follower.update(rollouts * 0.01 + 12.0).peaks(0.0, rollouts * 0.01 + 12.0, 150)
    return first, time.perf_counter() - started


def measure(rollouts: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        path = write_run(Path(folder), rollouts)
        source = ReplaySource(path)
        builds = []
        for _ in range(repeats):
            started = time.perf_counter()
            timeline_of_recording(source.events)
            builds.append(time.perf_counter() - started)
        opens, zooms, redraws, idles = [], [], [], []
        for _ in range(repeats):
            opened, zoomed, redrawn, idle = asyncio.run(open_and_zoom(path, zooms=10))
            opens.append(opened)
            zooms += zoomed
            redraws += redrawn
            idles += idle
    lives = [live_updates(rollouts) for _ in range(repeats)]
    return {
        "rollouts": rollouts,
        "events": len(source.events),
        "repeats": repeats,
        "open_ms": statistics.median(opens) * 1000,
        "open_max_ms": max(opens) * 1000,
        "zoom_ms": statistics.median(zooms) * 1000,
        "zoom_max_ms": max(zooms) * 1000,
        "zoom_redraw_ms": statistics.median(redraws) * 1000,
        "unchanged_key_ms": statistics.median(idles) * 1000,
        "model_ms": statistics.median(builds) * 1000,
        "live_first_update_ms": statistics.median(first for first, _ in lives) * 1000,
        "live_update_500_ms": statistics.median(after for _, after in lives) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    arguments = parser.parse_args()
    print(json.dumps(measure(arguments.rollouts, arguments.repeats)))


if __name__ == "__main__":
    main()
