"""Report benchmark: `osmosis-tui report` on recorded runs of 10,000 and 100,000 rollouts.

The recordings are the timeline benchmark's (`bench.timeline.write_run`: 64 in flight over
four servers, the limit changed and dispatch paused along the way, one rollout in 20 failed).
Each report is a subprocess of the command, as a user runs it; reported per size, the median
of the repeats: wall time, CPU and peak RSS (from `wait4`), and what the page weighs: its
bytes and its elements (the timeline's SVG, the whole page), which the fixed columns and the
bounded table keep from growing with the run.

`python -m bench.report` prints one JSON line (`--rollouts`, `--repeats`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.timeline import write_run


def report_once(folder: Path, output: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one `osmosis-tui report`."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "tui", "report", str(folder), "-o", str(output)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"osmosis-tui report failed on {folder}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(rollouts: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp) / f"run-{rollouts}"
        folder.mkdir()
        write_run(folder, rollouts)
        output = Path(temp) / "report.html"
        runs = [report_once(folder, output) for _ in range(repeats)]
        page = output.read_text(encoding="utf-8")
    timeline = page[page.index('<figure id="timeline">') : page.index("</figure>")]
    return {
        "rollouts": rollouts,
        "wall_s": round(statistics.median(run[0] for run in runs), 2),
        "cpu_s": round(statistics.median(run[1] for run in runs), 2),
        "peak_rss_mb": round(statistics.median(run[2] for run in runs)),
        "page_kb": round(len(page.encode()) / 1024),
        "timeline_elements": timeline.count("<") - timeline.count("</"),
        "page_elements": page.count("<") - page.count("</") - 1,  # the doctype is none
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rollouts", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps([measure(rollouts, args.repeats) for rollouts in args.rollouts]))


if __name__ == "__main__":
    main()
