"""SIGKILL of `osmosis-tui eval` at random moments, again and again on the same run (issue 7 §1).

After every kill the journal holds whole records only, never two for one work item, and the
next resume runs only what is missing; a last resume completes the run with every item
exactly once. CI kills 5 times; `make soak` (OSMOSIS_SOAK=full) kills 25 times.

tests/eval_results/test_events.py kills a bare journal writer in a loop; tests/eval_run/
test_resume.py kills one eval once. This is the whole command, many times, at any moment:
during start-up, mid-run, while the results are written at the end.
"""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from functools import partial
from pathlib import Path

from tests.eval_run.command import run_eval, start_eval
from tests.eval_run.files import multiply_rows, summary_of, write_jsonl
from tests.eval_run.servers import ServedDemo
from tests.polling import eventually_sync
from tests.reliability.counts import FULL, scaled

KILLS = scaled(5, 25)
ROWS = 700 if FULL else 40  # at full size, every kill lands mid-run


def grew_past(path: Path, size: int) -> bool:
    """Whether `path` exists and holds more than `size` bytes."""
    return path.exists() and path.stat().st_size > size


def journal_lines(path: Path) -> list[dict[str, object]]:
    """Every record of events.jsonl; fails on a line that is not whole JSON."""
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()
    records = [json.loads(line) for line in lines if line.strip()]
    # A torn tail can only be the very last write, cut by the kill; the next run repairs it.
    if tail:
        try:
            json.loads(tail)
        except ValueError:
            return records
        raise AssertionError(f"an unterminated but whole record at the end: {tail!r}")
    return records


def test_sigkill_at_random_moments_never_tears_or_duplicates_and_resume_completes(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    dataset = write_jsonl(
        tmp_path / "rows.jsonl", multiply_rows(ROWS, metadata={"stub": "slow:0.15"})
    )
    args = ("--server", demo_server.url, "--dataset-file", str(dataset), "--name", "k")
    events = tmp_path / ".osmosis" / "evals" / "k" / "events.jsonl"
    log = events.with_name("logs.txt")
    history: list[tuple[float, int]] = []
    for _ in range(KILLS):
        delay = rng.uniform(0.5, 2.5) if FULL else rng.uniform(0.2, 2.0)
        logged = log.stat().st_size if log.exists() else 0
        run = start_eval(*args, "--max-in-flight", "4", cwd=tmp_path)
        # The random moment counts from when the run has started (its first log line), not
        # from the process start, so a slow, loaded machine still kills it mid-run.
        eventually_sync(partial(grew_past, log, logged), "the run to start")
        time.sleep(delay)
        run.send_signal(signal.SIGKILL)
        run.finish()
        records = journal_lines(events)
        history.append((round(delay, 2), len(records)))
        keys = Counter((r["row_index"], r["run_index"]) for r in records)
        duplicated = [key for key, count in keys.items() if count > 1]
        assert not duplicated, f"seed {seed}, kills {history}: items journaled twice {duplicated}"

    final = run_eval(*args, "--max-in-flight", "8", "--json", cwd=tmp_path, timeout=120)
    assert final.returncode == 0, f"seed {seed}, kills {history}\n{final.stderr}"
    summary = summary_of(final.stdout)
    assert summary["items"]["done"] == ROWS
    records = journal_lines(events)
    assert Counter(r["row_index"] for r in records) == Counter(range(ROWS)), (seed, history)
    assert all(r["status"] == "success" for r in records)
    assert summary["items"]["resumed"] == history[-1][1]
    print(f"kill loop: seed {seed}, {KILLS} kills (delay s, items journaled): {history}")
    # The kills did land at different moments: some before anything finished, some later.
    assert len({count for _, count in history}) > 1 or history[-1][1] == ROWS, history
