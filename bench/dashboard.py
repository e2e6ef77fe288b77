"""Dashboard benchmark: 10,000 tracked rollouts (or `--rollouts`, e.g. issue 29's 100,000) and
500 status changes a second, headless.

Reports the app's CPU share (the change generator's own cost, measured alone, subtracted),
key-press-to-repaint latency (time from a key press until the table has drawn the row the
cursor moved to), resident memory, the time to the first frame, the CPU share with nothing
changing (idle), and the time from a sort key to the table drawn in that order, for every
sortable column. The collector is tuned as an eval runs it (`settled_for_a_run`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
import time
from collections.abc import Mapping
from typing import Any
from unittest.mock import patch

from textual import events
from textual.strip import Strip

from bench.table import Figure, ms
from core.board import RolloutBoard
from core.eval.cost.spend import Spend, board_spend
from core.eval.dispatch_gate import DispatchState
from core.eval.results.metrics import Progress
from core.eval.results.records import ItemKey, ItemResult
from core.types import RolloutStatus
from tui.app import create_app
from tui.sources.base import NewRollout, ServerView
from tui.sources.pass_rule import PassRule
from tui.widgets.table.columns import BASE
from tui.widgets.table.rollout_table import RolloutTable
from tui.widgets.table.sorting import SORT_COLUMNS

ROLLOUTS = 10_000
CHANGES_PER_S = 500
DURATION_S = 10.0
TICK_S = 0.02
IDLE_S = 5.0
CYCLE = (RolloutStatus.RUNNING, RolloutStatus.GRADING, RolloutStatus.QUEUED)


class SyntheticSource:
    """A board fed by the benchmark itself; no servers, nothing to send."""

    def __init__(self, board: RolloutBoard) -> None:
        self.board = board
        self.subtitle = f"{len(board.records)} rollouts · {CHANGES_PER_S} changes/s"

    title = "bench"
    read_only = True
    finished = False
    can_send = False
    preview_root = None
    trials_root = None
    ending = None
    event_silence = None
    playback = None
    sends_by_hand = False
    is_watch = False
    detaches_on_quit = False
    servers_stop_with_run = False
    pass_rule = PassRule(1, 1.0)
    baseline = None

    def progress(self) -> Progress:
        return Progress(0, len(self.board.records), 0, 0, None, 0)

    def baseline_counts(self) -> None:
        return None

    def spend(self) -> Spend:
        return board_spend(self.board.total_cost_usd, self.progress())

    def servers(self) -> list[ServerView]:
        return []

    def carried_results(self) -> Mapping[ItemKey, ItemResult]:
        return {}

    async def run(self) -> None:
        await asyncio.Event().wait()

    async def interrupt(self, *, cancel_in_flight: bool) -> None:
        return None

    async def close(self) -> None:
        return None

    async def submit(self, rollout: NewRollout) -> str:
        raise RuntimeError("read-only")

    async def rerun(self, rollout_id: str) -> str:
        raise RuntimeError("read-only")

    def dispatch(self) -> DispatchState | None:
        return None

    async def pause_dispatch(self, paused: bool) -> None:
        raise RuntimeError("read-only")

    async def set_max_in_flight(self, limit: int) -> int:
        raise RuntimeError("read-only")

    async def set_budget(self, usd: float) -> None:
        raise RuntimeError("read-only")

    async def requeue(self, rollout_id: str) -> str:
        raise RuntimeError("read-only")

    async def drain(self, url: str, *, drained: bool) -> None:
        raise RuntimeError("read-only")


def populate(rollouts: int) -> RolloutBoard:
    board = RolloutBoard()
    now = time.monotonic()
    for index in range(rollouts):
        board.observe(f"r{index:06d}", RolloutStatus.QUEUED, now, row_index=index, run_index=0)
    return board


async def churn(board: RolloutBoard, seconds: float) -> int:
    """Apply CHANGES_PER_S status changes a second, spread over the board, for `seconds`."""
    changes = 0
    cursor = 0
    started = time.monotonic()
    deadline = started + seconds
    while time.monotonic() < deadline:
        now = time.monotonic()
        # Catch up with the schedule: sleeps overshoot, the rate must not fall behind.
        for _ in range(int((now - started) * CHANGES_PER_S) - changes):
            rollouts = len(board.records)
            index = cursor % rollouts
            status = CYCLE[(cursor // rollouts) % len(CYCLE)]
            board.observe(f"r{index:06d}", status, now)
            cursor += 1
            changes += 1
        await asyncio.sleep(TICK_S)
    return changes


async def generator_cpu(rollouts: int) -> float:
    board = populate(rollouts)
    cpu0 = time.process_time()
    await churn(board, DURATION_S)
    return time.process_time() - cpu0


async def measure(rollouts: int) -> dict[str, Any]:
    alone = await generator_cpu(rollouts)
    board = populate(rollouts)
    app = create_app(SyntheticSource(board), start_work=False)
    drawn = asyncio.Event()  # set when the table draws the line under the cursor
    original = RolloutTable.render_line

    def spy(table: RolloutTable, y: int) -> Strip:
        if table.rollout_at(y) == table.cursor_id:
            drawn.set()
        return original(table, y)

    RolloutTable.render_line = spy  # type: ignore[method-assign, assignment]
    started = time.monotonic()
    try:
        async with app.run_test(size=(160, 48)):
            await drawn.wait()
            first_frame = time.monotonic() - started
            churner = asyncio.create_task(churn(board, DURATION_S))
            cpu0, wall0 = time.process_time(), time.monotonic()
            latencies = []
            table = app.query_one(RolloutTable)
            while not churner.done():
                before = table.cursor_id
                drawn.clear()
                t0 = time.monotonic()
                # Posted like a terminal key (Pilot.press would also wait for the app to go
                # idle, which under constant churn measures the churn, not the key).
                app.post_message(events.Key("down", None))
                await drawn.wait()
                while table.cursor_id == before:  # drawn before the key was handled
                    drawn.clear()
                    await drawn.wait()
                latencies.append(time.monotonic() - t0)
                await asyncio.sleep(0.25)
            changes = await churner
            cpu = time.process_time() - cpu0
            wall = time.monotonic() - wall0
            idle_cpu0, idle_wall0 = time.process_time(), time.monotonic()
            await asyncio.sleep(IDLE_S)
            idle = (time.process_time() - idle_cpu0) / (time.monotonic() - idle_wall0)
            sorts = await _sort_times(app, table, drawn)
    finally:
        RolloutTable.render_line = original  # type: ignore[method-assign]
    latencies.sort()
    return {
        "rollouts": rollouts,
        "idle_cpu_share": idle,
        "sort_ms": sorts,
        "sort_max_ms": max(sorts.values()),
        "changes_per_s": round(changes / wall),
        "cpu_share": max(cpu - alone, 0.0) / wall,
        "cpu_share_with_generator": cpu / wall,
        "key_p50_ms": latencies[len(latencies) // 2] * 1000,
        "key_p99_ms": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000,
        "key_presses": len(latencies),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "first_frame_ms": first_frame * 1000,
    }


async def _sort_times(app: Any, table: RolloutTable, drawn: asyncio.Event) -> dict[str, float]:
    """Each sortable column's key pressed: the time until the table has drawn in that
    order (the row under the cursor drawn after the table took the new order)."""
    times: dict[str, float] = {}
    for column in SORT_COLUMNS.values():
        if column.column == BASE:
            continue  # sorts only with a baseline
        t0 = time.monotonic()
        app.post_message(events.Key(column.key, column.key))
        # The table sorts when it takes the new view, then draws: the next draw of the row
        # under the cursor is the first frame in the new order.
        while table.view.sort.column != column.column:  # noqa: ASYNC110 - no event for it
            await asyncio.sleep(0.001)
        drawn.clear()
        await drawn.wait()
        times[column.column] = (time.monotonic() - t0) * 1000
    return times


def figures(d: dict[str, Any]) -> list[Figure]:
    where = f"dashboard, synthetic: {d['rollouts']:,} rollouts, {d['changes_per_s']} changes/s"
    # The resident memory's bound is the 10,000-row target's; issue 29 sets none at 100,000.
    bounded = d["rollouts"] <= ROLLOUTS
    found = [
        Figure(
            f"{where}: CPU share / key p99 / RSS",
            f"{d['cpu_share']:.0%} / {ms(d['key_p99_ms'])} / {d['rss_mb']:.0f} MB",
            "",
            "< 30% / < 100 ms" + (" / < 300 MB" if bounded else ""),
            d["cpu_share"] < 0.3 and d["key_p99_ms"] < 100 and (not bounded or d["rss_mb"] < 300),
        )
    ]
    if "idle_cpu_share" in d:  # a results file of a run before these figures has none
        slowest = max(d["sort_ms"], key=d["sort_ms"].get)
        found += [
            Figure(
                f"{where}: CPU share idle",
                f"{d['idle_cpu_share']:.1%}",
                "",
                "< 5%",
                d["idle_cpu_share"] < 0.05,
            ),
            Figure(
                f"{where}: sort by a column, slowest ({slowest})",
                ms(d["sort_max_ms"]),
                "",
                "< 200 ms",
                d["sort_max_ms"] < 200,
            ),
        ]
    return found


def dashboard_benchmark(rollouts: int = ROLLOUTS) -> dict[str, Any]:
    from core.eval.gc_tuning import settled_for_a_run

    # The sort keys pressed are saved as the dashboard's settings: in a folder of the
    # benchmark's own, so that neither the user's settings nor an earlier run's sort count.
    with (
        tempfile.TemporaryDirectory(prefix="bench-dashboard-") as config,
        patch.dict(os.environ, {"XDG_CONFIG_HOME": config}),
        settled_for_a_run(),  # as `osmosis-tui eval` runs its dashboard
    ):
        return asyncio.run(measure(rollouts))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=ROLLOUTS)
    print(json.dumps(dashboard_benchmark(parser.parse_args().rollouts), indent=1))
