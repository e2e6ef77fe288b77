"""`osmosis-tui runs` over a results root of 200 finished runs.

The run folders are written by the product's own writers (`bench.compare_runs.write_run`:
`RunFolder`, the journal's line format, `Snapshots`), `ITEMS` work items each. Timed, each a
subprocess of the console script as a user runs it, the median of interleaved repeats after a
warm-up: the listing as it is (every run finished, its metrics.json written after its
journal: counted from the summaries), and the same root with every journal touched after its
metrics.json (as a run killed after its last snapshot leaves it: every journal read), which is
the bound the summaries lift. Issue 29's target: under 1 s.

`python -m bench.runs_list` runs it alone; `make bench` includes it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.compare_runs import Shape, osmosis_tui, outcomes, write_run
from bench.procs import ROOT
from bench.table import Figure

RUNS = 200
ITEMS = 5_000
TARGET_SEC = 1.0


def _listing(root: Path, runs: int) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [osmosis_tui(), "runs", "-o", str(root), "--json"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    elapsed = time.perf_counter() - started
    listed = json.loads(done.stdout)["runs"]
    if len(listed) != runs or any(run["done"] != run["total"] for run in listed):
        raise RuntimeError(f"runs listed {len(listed)} runs, not {runs} finished ones")
    return elapsed


def _touch_journals(root: Path, *, after_metrics: bool) -> None:
    for folder in root.iterdir():
        if not (folder / "metrics.json").exists():
            continue
        written = (folder / "metrics.json").stat().st_mtime_ns
        moment = written + 1_000_000_000 if after_metrics else written - 1_000_000_000
        os.utime(folder / "events.jsonl", ns=(moment, moment))


def measure(*, runs: int = RUNS, items: int = ITEMS, repeats: int = 5) -> dict[str, Any]:
    shape = Shape(items, 1)
    a, b = outcomes(shape, seed=0)
    with tempfile.TemporaryDirectory(prefix="bench-runs-") as tmp:
        root = Path(tmp)
        for number in range(runs):
            write_run(root, f"run{number:03d}", shape, a if number % 2 else b)
        lines = sum(1 for _ in (root / "run000" / "events.jsonl").open("rb")) * runs
        samples: dict[str, list[float]] = {"summaries": [], "journals": []}
        for round_number in range(repeats + 1):
            for case, kept in samples.items():
                _touch_journals(root, after_metrics=case == "journals")
                elapsed = _listing(root, runs)
                if round_number:  # the first round warms the page cache
                    kept.append(elapsed)
    return {
        "runs": runs,
        "items": items,
        "journal_lines": lines,
        "summaries_s": statistics.median(samples["summaries"]),
        "journals_s": statistics.median(samples["journals"]),
    }


def figures(result: dict[str, Any]) -> list[Figure]:
    where = f"runs: {result['runs']} finished runs of {result['items']:,} items"
    return [
        Figure(
            f"{where}, listed",
            f"{result['summaries_s']:.2f} s",
            "",
            f"< {TARGET_SEC:.0f} s",
            result["summaries_s"] < TARGET_SEC,
        ),
        Figure(
            f"{where}, every journal read ({result['journal_lines']:,} lines)",
            f"{result['journals_s']:.2f} s",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=ITEMS, help="work items per run")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from bench.table import format_table

    result = measure(items=args.items, repeats=args.repeats)
    print(json.dumps(result))
    print(format_table(figures(result)))


if __name__ == "__main__":
    main()
