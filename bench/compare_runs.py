"""Compare at scale: `osmosis-tui compare A B --json` on two runs of 100,000 work items each.

The two run folders are written by the product's own writers (`core.eval.results`):
`RunFolder` makes the folder and its manifest, the journal's own line format
(`journal_line`) makes `events.jsonl`, `Snapshots` writes `index.jsonl`, `summary.jsonl`,
`progress.json` and `metrics.json` as a finished run leaves them. Run B is run A with about
10 % of its items drawn again (a new reward, an error of another type, a skip), so every
class of the comparison has items. Two shapes: 100,000 rows x 1 attempt with rewards on a
continuum (the paired bootstrap's slow path: the rows' differences take thousands of
values) and 25,000 rows x 4 attempts (a row's sums and pass@k over its attempts).

Each compare is a subprocess of the project's console script, as a user runs it, timed from
spawn to exit, its CPU (user + system) and peak resident memory from `wait4`'s accounting (the
CPU moves less than the wall time on a machine shared with other work); the shapes alternate,
once to warm the page cache and then `repeats` times, and the median is kept. The issue's
target: under 3 s.

`python -m bench.compare_runs` runs it alone; `make bench` includes it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.procs import ROOT
from bench.table import Figure
from core.eval.results.durable import write_bytes_atomic
from core.eval.results.events import journal_line
from core.eval.results.folder import EVENTS_FILE, RunFolder
from core.eval.results.manifest import manifest_inputs
from core.eval.results.metrics import RunIdentity
from core.eval.results.records import ItemKey, ItemResult, iso_utc
from core.eval.results.snapshots import Snapshots

ITEMS = 100_000
DIFFERING = 0.10
PASS_THRESHOLD = 0.5
TARGET_SEC = 3.0
ERROR_TYPES = ("agent_error", "timeout", "http_error")


@dataclass(frozen=True)
class Shape:
    rows: int
    n: int

    @property
    def label(self) -> str:
        return f"{self.rows:,} rows x {self.n}"


SHAPES = (Shape(ITEMS, 1), Shape(ITEMS // 4, 4))


def _outcome(rng: random.Random, row: int, attempt: int, rollout_id: str) -> ItemResult:
    """One finished item: mostly graded (a reward in [0, 1)), some errors, a few skips."""
    draw = rng.random()
    common: dict[str, Any] = {
        "row_index": row,
        "run_index": attempt,
        "source_row_index": row,
        "rollout_id": rollout_id,
        "duration_ms": rng.uniform(200.0, 20_000.0),
    }
    if draw < 0.08:
        return ItemResult(status="failed", error_type=rng.choice(ERROR_TYPES), **common)
    if draw < 0.10:
        return ItemResult(status="skipped", tokens=rng.randrange(50, 4000), **common)
    return ItemResult(
        status="success", reward=rng.random(), tokens=rng.randrange(50, 4000), **common
    )


def outcomes(
    shape: Shape, seed: int
) -> tuple[dict[ItemKey, ItemResult], dict[ItemKey, ItemResult]]:
    """Run A's results, and run B's: A's with about `DIFFERING` of them drawn again."""
    rng = random.Random(seed)
    a: dict[ItemKey, ItemResult] = {}
    b: dict[ItemKey, ItemResult] = {}
    for row in range(shape.rows):
        for attempt in range(shape.n):
            index = row * shape.n + attempt
            first = _outcome(rng, row, attempt, f"{index:032x}")
            a[first.key] = first
            again = rng.random() < DIFFERING
            b[first.key] = _outcome(rng, row, attempt, f"{index + ITEMS:032x}") if again else first
    return a, b


def write_run(root: Path, name: str, shape: Shape, results: dict[ItemKey, ItemResult]) -> Path:
    """A finished run folder of `results`, written as the eval writes one."""
    inputs = manifest_inputs(
        model_path="openai/bench-model",
        dataset_sha256="0" * 64,
        selected_source_rows=range(shape.rows),
        n=shape.n,
        rollout_name="bench",
        entrypoint="main.py",
        source_digest="0" * 64,
        env={},
        secret_names=(),
        agent_timeout_sec=None,
        grader_timeout_sec=None,
    )
    folder = RunFolder.open(root, name, inputs, fresh=False)
    write_bytes_atomic(
        folder.path / EVENTS_FILE, b"".join(journal_line(result) for result in results.values())
    )
    identity = RunIdentity(
        local_run_id=folder.local_run_id,
        run_name=name,
        dataset_name="bench",
        model_name="openai/bench-model",
        rollout_name="bench",
        started_at=folder.created_at,
    )
    snapshots = Snapshots(
        folder,
        identity,
        pass_threshold=PASS_THRESHOLD,
        sampled_rows=shape.rows,
        n=shape.n,
        total_dataset_rows=shape.rows,
    )
    snapshots.write(results, (), state="finished", completed_at=iso_utc(), project=())
    return folder.path


def osmosis_tui() -> str:
    """The console script of the interpreter running this (make bench: the project's .venv)."""
    return str(Path(sys.executable).parent / "osmosis-tui")


@dataclass(frozen=True)
class Sample:
    wall_s: float
    cpu_s: float
    peak_rss_mb: float


def timed_compare(a: Path, b: Path) -> tuple[Sample, dict[str, Any]]:
    """What one `compare A B --json` took, and the JSON document it printed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            [osmosis_tui(), "compare", str(a), str(b), "--json"],
            stdout=out,
            stderr=err,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"compare exited {process.returncode}: {err.read().decode()}")
        out.seek(0)
        document: dict[str, Any] = json.loads(out.read())
    sample = Sample(elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)
    return sample, document


def _check(document: dict[str, Any], items: int) -> dict[str, int]:
    """The class counts, after checking that every item was classed."""
    counts = {name: listed["count"] for name, listed in document["classes"].items()}
    if sum(counts.values()) != items or document["b"]["finished"] != items:
        raise RuntimeError(f"compare classed {sum(counts.values())} of {items} items: {counts}")
    return counts


def measure(*, items: int = ITEMS, repeats: int = 5) -> list[dict[str, Any]]:
    shapes = [Shape(shape.rows * items // ITEMS, shape.n) for shape in SHAPES]
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        pairs: list[tuple[Shape, Path, Path]] = []
        for number, shape in enumerate(shapes):
            started = time.perf_counter()
            a, b = outcomes(shape, seed=number)
            root = Path(tmp) / f"shape{number}"
            pairs.append((shape, write_run(root, "a", shape, a), write_run(root, "b", shape, b)))
            print(
                f"  {shape.label}: two runs written in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
        samples: dict[Shape, list[Sample]] = {shape: [] for shape in shapes}
        counts: dict[Shape, dict[str, int]] = {}
        for round_number in range(repeats + 1):
            for shape, a_folder, b_folder in pairs:
                sample, document = timed_compare(a_folder, b_folder)
                counts[shape] = _check(document, shape.rows * shape.n)
                if round_number:  # the first round warms the page cache
                    samples[shape].append(sample)
                print(
                    f"  {shape.label}: {sample.wall_s:.2f} s, CPU {sample.cpu_s:.2f} s, "
                    f"{sample.peak_rss_mb:.0f} MB",
                    flush=True,
                )
    return [
        {
            "rows": shape.rows,
            "n": shape.n,
            "items": shape.rows * shape.n,
            "wall_s_median": statistics.median(s.wall_s for s in samples[shape]),
            "wall_s": [s.wall_s for s in samples[shape]],
            "cpu_s_median": statistics.median(s.cpu_s for s in samples[shape]),
            "peak_rss_mb_median": statistics.median(s.peak_rss_mb for s in samples[shape]),
            "classes": counts[shape],
        }
        for shape in shapes
    ]


def figures(results: list[dict[str, Any]]) -> list[Figure]:
    return [
        Figure(
            f"compare --json, two runs of {r['items']:,} items ({r['rows']:,} rows x {r['n']}, "
            f"{r['classes']['regressed']:,} regressed, {r['classes']['improved']:,} improved): "
            "wall time / CPU / peak RSS",
            f"{r['wall_s_median']:.2f} s / {r['cpu_s_median']:.2f} s / "
            f"{r['peak_rss_mb_median']:.0f} MB",
            "",
            f"< {TARGET_SEC:.0f} s",
            r["wall_s_median"] < TARGET_SEC,
        )
        for r in results
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=ITEMS, help="work items per run")
    parser.add_argument("--repeats", type=int, default=5, help="timed compares per shape")
    args = parser.parse_args()
    results = measure(items=args.items, repeats=args.repeats)
    from bench.table import format_table

    print(format_table(figures(results)))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
