"""A big run killed halfway and resumed: every work item exactly once, and its replay says the
numbers of its metrics.json (issue 29's acceptance).

Processes: the stub model (answering at once), two of our rollout servers running the benchmark
rollout (`bench/workflow.py`), and `osmosis-tui eval --headless` as a user runs it: the CLI on a
JSONL dataset of `ITEMS` multiplication rows, `IN_FLIGHT` rollouts at once. The first invocation
is killed (SIGKILL: no handler runs, as when the machine goes away) once half the items are in
its events.jsonl; the same command then runs again and resumes the run.

Checked and reported: the exit status of the resume; events.jsonl and index.jsonl each hold
every work item exactly once; the replay of the run folder (its transitions.jsonl, both
invocations) played to its end shows the done, completed, passed, pass rate and mean reward
of metrics.json. Timed: the resume, opening the replay (reading the recording) and playing it
to its end.

`python -m bench.resume` runs it alone (`--items` to change its size); `make bench` includes
it.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.procs import multiply_fleet
from bench.scale import write_multiply_dataset
from bench.table import Figure, format_table

ITEMS = 100_000
IN_FLIGHT = 128
SERVERS = 2
NAME = "resume"


def _lines(path: Path) -> int:
    """Complete lines in `path` so far (none while it does not exist)."""
    try:
        with path.open("rb") as read:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: read.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def _keys(path: Path) -> Counter[tuple[int, int]]:
    """How often each (row_index, run_index) has a line in `path`."""
    keys: Counter[tuple[int, int]] = Counter()
    with path.open() as read:
        for line in read:
            record = json.loads(line)
            keys[record["row_index"], record["run_index"]] += 1
    return keys


def _killed_halfway(argv: list[str], cwd: Path, events: Path, items: int) -> int:
    """Run `argv` until half the items are journaled, then SIGKILL it; the lines it left."""
    with (cwd / "first.log").open("w") as log:
        process = subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        try:
            while _lines(events) < items // 2:
                if process.poll() is not None:
                    raise RuntimeError(f"the run ended before it was killed: see {log.name}")
                time.sleep(0.2)
            process.send_signal(signal.SIGKILL)
        finally:
            process.wait()
    return _lines(events)


def _replayed(folder: Path) -> dict[str, Any]:
    """The replay of `folder` played to its end: its numbers, and how long it took."""
    from tui.sources.replay import ReplaySource

    started_at = time.monotonic()
    source = ReplaySource(folder / "transitions.jsonl")
    opened = time.monotonic()
    source.to_end()
    progress = source.progress()
    return {
        "open_s": opened - started_at,
        "to_end_s": time.monotonic() - opened,
        "warnings": len(source.warnings),
        "done": progress.done,
        "completed": progress.completed,
        "passed": progress.passed,
        "pass_rate": progress.pass_rate,
        "mean_reward": progress.mean_reward,
    }


def measure(py: str, items: int = ITEMS) -> dict[str, Any]:
    with ExitStack() as stack:
        fleet = multiply_fleet(stack, py, SERVERS, prefix="bench-resume-")
        tmp = fleet.folder
        dataset = write_multiply_dataset(tmp / "rows.jsonl", items)
        argv = [
            *(py, "-m", "tui", "eval", "--headless", "--dataset-file", str(dataset)),
            *("--name", NAME, "--output", str(tmp / "out")),
            *("--max-in-flight", str(IN_FLIGHT)),
            *("--chat-url", fleet.chat_url),
            *(arg for url in fleet.servers for arg in ("--server", url)),
        ]
        folder = tmp / "out" / NAME
        events = folder / "events.jsonl"
        killed_at = _killed_halfway(argv, tmp, events, items)
        started_at = time.monotonic()
        with (tmp / "resume.log").open("w") as log:
            resumed = subprocess.run(
                argv, check=False, cwd=tmp, stdout=log, stderr=subprocess.STDOUT
            )
        resume_s = time.monotonic() - started_at
        journaled, indexed = _keys(events), _keys(folder / "index.jsonl")
        summary = json.loads((folder / "metrics.json").read_text())["summary"]
        replayed = _replayed(folder)
    every_item = Counter({(row, 0): 1 for row in range(items)})
    return {
        "items": items,
        "killed_at": killed_at,
        "resume_exit": resumed.returncode,
        "resume_s": resume_s,
        "events_once": journaled == every_item,
        "index_once": indexed == every_item,
        "metrics": {
            "done": summary["total_samples"],
            "completed": summary["completed_samples"],
            "passed": summary["passed"],
            "pass_rate": summary["pass_rate"],
            "mean_reward": summary["reward_stats"]["mean"],
        },
        "replay": replayed,
    }


def _same_numbers(result: dict[str, Any]) -> bool:
    metrics, replay = result["metrics"], result["replay"]
    exact = all(replay[name] == metrics[name] for name in ("done", "completed", "passed"))
    rate, mean = replay["pass_rate"], replay["mean_reward"]
    return (
        exact
        and rate is not None
        and math.isclose(rate, metrics["pass_rate"], abs_tol=1e-9)
        and mean is not None
        and math.isclose(mean, metrics["mean_reward"], abs_tol=1e-9)
    )


def figures(result: dict[str, Any]) -> list[Figure]:
    where = f"resume: a run of {result['items']:,} items SIGKILLed at {result['killed_at']:,}"
    once = result["events_once"] and result["index_once"]
    replay = result["replay"]
    metrics = result["metrics"]
    return [
        Figure(
            f"{where}: the resume's exit status, every item exactly once",
            f"exit {result['resume_exit']}, "
            f"events.jsonl {'once' if result['events_once'] else 'NOT once'}, "
            f"index.jsonl {'once' if result['index_once'] else 'NOT once'} "
            f"(resume {result['resume_s']:.0f} s)",
            "",
            "exit 0, each once",
            result["resume_exit"] == 0 and once,
        ),
        Figure(
            f"{where}: its replay's numbers against metrics.json",
            f"done {replay['done']:,} passed {replay['passed']:,} mean "
            f"{replay['mean_reward']} (metrics.json: {metrics['done']:,}, "
            f"{metrics['passed']:,}, {metrics['mean_reward']})",
            "",
            "the same",
            _same_numbers(result),
        ),
        Figure(
            f"{where}: its replay opened, then played to its end",
            f"{replay['open_s']:.1f} s, then {replay['to_end_s']:.1f} s "
            f"({replay['warnings']} warnings)",
            "",
            "",
            None,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=ITEMS, help="work items of the run")
    args = parser.parse_args()
    result = measure(sys.executable, args.items)
    print(json.dumps(result))
    print(format_table(figures(result)))


if __name__ == "__main__":
    main()
