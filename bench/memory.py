"""Memory per finished work item: what a long eval keeps of each rollout it is done with.

Processes: the stub model (answering at once), two of our rollout servers running the benchmark
rollout (`bench/workflow.py`), and the eval, an `EvalSession` in a process of its own (what
`osmosis-tui eval --server ... --headless` runs), `IN_FLIGHT` rollouts at once. With
`--dashboard`, the eval is run by the dashboard instead (`LiveSource`, what `osmosis-tui eval`
runs without `--headless`), in a headless terminal of 160 x 48 following the newest row, so
that every row is drawn.

The eval's resident memory is read when the first `WARM_SHARE` of the items have finished (the
in-flight set, the gateway's and the servers' connections, every cache warm: what the run holds
"at the start" of its steady state) and again when the last has; their difference over the
items finished in between is the memory each finished item keeps. Issue 29's target: at most
1 KB. With `--trace`, tracemalloc follows the run (slower) and the allocation sites of what is
still alive at the end, grown since the first mark, are printed: what holds it.

`python -m bench.memory` runs it alone (`--items` to change its size); `make bench` includes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import tracemalloc
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.procs import ROOT, multiply_fleet
from bench.scale import multiply_plan
from bench.table import Figure
from core.eval import EvalSession
from core.eval.summary import EvalSummary
from tui.sources.live import LiveSource

ITEMS = 30_000
IN_FLIGHT = 128
SERVERS = 2
WARM_SHARE = 0.1
TARGET_KB = 1.0


def _rss_kb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 1024


async def run_eval(
    servers: list[str], chat_url: str, items: int, folder: Path, *, dashboard: bool
) -> dict[str, Any]:
    """The eval process: `items` work items over `servers`, with the two memory marks; with
    `dashboard`, run by the dashboard (see `_dashboard_run`)."""
    from core.eval.gc_tuning import settled_for_a_run

    plan = multiply_plan(servers, chat_url, items, IN_FLIGHT, folder, name="memory")
    if dashboard:
        source = LiveSource(plan, rerun="python -m bench.memory")
        session = source.session
    else:
        session = EvalSession(plan)
    marks: dict[str, float] = {}
    warm_at = int(items * WARM_SHARE)
    snapshot: list[tracemalloc.Snapshot] = []

    async def watch() -> None:
        while session.runner is None or session.runner.finished < warm_at:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        marks["warm_finished"] = session.runner.finished
        marks["warm_kb"] = _rss_kb()
        if tracemalloc.is_tracing():
            snapshot.append(tracemalloc.take_snapshot())

    watcher = asyncio.ensure_future(watch())
    started_at = time.monotonic()
    with settled_for_a_run():  # as `osmosis-tui eval` runs
        summary = await (_dashboard_run(source) if dashboard else session.run())
        # Read before the session's objects can go: what the finished run still holds.
        marks["end_kb"] = _rss_kb()
        marks["end_finished"] = len(summary.results)
        sites: list[str] = []
        if snapshot:
            grown = tracemalloc.take_snapshot().compare_to(snapshot[0], "lineno")
            per_item = marks["end_finished"] - marks["warm_finished"]
            sites = [
                f"{stat.size_diff / per_item:7.0f} B/item  {stat.traceback[0]}"
                for stat in grown[:25]
            ]
    watcher.cancel()
    failed = sum(1 for result in summary.results.values() if result.status != "success")
    per_item_kb = (marks["end_kb"] - marks["warm_kb"]) / (
        marks["end_finished"] - marks["warm_finished"]
    )
    return {
        "items": items,
        "dashboard": dashboard,
        "finished": marks["end_finished"],
        "failures": failed + items - marks["end_finished"],
        "wall_s": time.monotonic() - started_at,
        "rss_warm_mb": marks["warm_kb"] / 1024,
        "rss_end_mb": marks["end_kb"] / 1024,
        "kb_per_finished_item": per_item_kb,
        "sites": sites,
    }


async def _dashboard_run(source: LiveSource) -> EvalSummary:
    """The eval as `osmosis-tui eval` runs it with the dashboard: the app in a headless
    terminal of 160 x 48, following the newest row, so that every row is drawn once; its
    summary, read while the app is still open (what the finished run holds, the table's
    included)."""
    from tui.app import create_app

    app = create_app(source)
    async with app.run_test(size=(160, 48)):
        app.follow = True
        while source.summary is None:
            if source.ended:  # the run failed as a whole
                raise RuntimeError(source.failure or "the run ended without a summary")
            await asyncio.sleep(0.1)
        return source.summary


def measure(
    py: str, items: int = ITEMS, *, trace: bool = False, dashboard: bool = False
) -> dict[str, Any]:
    with ExitStack() as stack:
        fleet = multiply_fleet(stack, py, SERVERS, prefix="bench-memory-")
        out = subprocess.run(
            [
                py,
                *(("-X", "tracemalloc=1") if trace else ()),
                *("-m", "bench.memory", "--eval"),
                *("--servers", ",".join(fleet.servers)),
                *("--chat-url", fleet.chat_url),
                *("--items", str(items), "--folder", str(fleet.folder)),
                *(("--dashboard",) if dashboard else ()),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def figures(result: dict[str, Any]) -> list[Figure]:
    how = "with the dashboard" if result.get("dashboard") else "headless"
    where = f"memory: an eval of {result['items']:,} items {how}, {IN_FLIGHT} in flight"
    return [
        Figure(
            f"{where}: failures",
            str(result["failures"]),
            "",
            "0",
            result["failures"] == 0,
        ),
        Figure(
            f"{where}: eval memory per finished item",
            f"{result['kb_per_finished_item']:.2f} KB "
            f"(RSS {result['rss_warm_mb']:.0f} MB at {WARM_SHARE:.0%} -> "
            f"{result['rss_end_mb']:.0f} MB)",
            "",
            f"<= {TARGET_KB:.0f} KB",
            result["kb_per_finished_item"] <= TARGET_KB,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", action="store_true", help="run the eval process")
    parser.add_argument("--servers")
    parser.add_argument("--chat-url")
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--items", type=int, default=ITEMS, help="work items of the run")
    parser.add_argument("--trace", action="store_true", help="name what holds the memory")
    parser.add_argument(
        "--dashboard", action="store_true", help="the eval run by the dashboard (not headless)"
    )
    args = parser.parse_args()
    if args.eval:
        result = asyncio.run(
            run_eval(
                args.servers.split(","),
                args.chat_url,
                args.items,
                args.folder,
                dashboard=args.dashboard,
            )
        )
        print(json.dumps(result))
        return
    from bench.table import format_table

    result = measure(sys.executable, args.items, trace=args.trace, dashboard=args.dashboard)
    print("\n".join(result.pop("sites")))
    print(json.dumps(result))
    print(format_table(figures(result)))


if __name__ == "__main__":
    main()
