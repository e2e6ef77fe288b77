"""`osmosis-tui eval` stopped at random moments, again and again on the same run (issues 7, 15).

Each run launches the workspace's own rollout server (`uv run`, behind the lifeline's guard),
and is stopped at a random moment of start-up, run or wind-down: by SIGKILL in one loop, by a
mix of SIGTERM, SIGINT and SIGHUP (graceful stops) in the other. After every stop:

- the journal holds whole records only (a torn tail can only be the very last write) and
  never two for one work item: nothing torn, nothing duplicated;
- every record journaled before is still there, unchanged and in order: nothing lost;
- no process of any launched server is left (checked by the PIDs the servers print, and by
  every process working in the rollout's folder).

A last resume completes the run with every item exactly once. CI stops 5 times by SIGKILL and 3
times by signals; `make soak` (OSMOSIS_SOAK=full) 25 and 12 times.

tests/eval/results/test_events.py kills a bare journal writer in a loop; tests/eval/runs/
test_resume.py and test_workspace.py stop one eval once.
"""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from functools import partial
from pathlib import Path

from tests.eval.runs.command import alive, processes_in, run_eval, server_pids, start_eval
from tests.eval.runs.files import multiply_rows, summary_of, write_jsonl
from tests.polling import eventually_sync
from tests.reliability.counts import FULL, scaled

KILLS = scaled(5, 25)
SIGNALS = scaled(3, 12)
ROWS = 700 if FULL else 40  # at full size, every stop lands before the run's end
GRACEFUL = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# The workspace's model_path is a real provider's: its rollouts talk to the stub model instead.
CONFIG = ("configs/eval/multiply.toml", "--chat-url", "stub")


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


def healthy_since(log: Path, offset: int) -> bool:
    """Whether the log says, past `offset`, that the launched server is healthy."""
    with log.open("rb") as stream:
        stream.seek(offset)
        return b"[server] rollout server healthy" in stream.read()


class StopLoop:
    """One run of the workspace, started again and again and stopped each time."""

    def __init__(self, workspace: Path, name: str, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.workspace = workspace
        self.rollout = (workspace / "rollouts" / "multiply").resolve()
        dataset = write_jsonl(
            workspace / f"{name}.jsonl", multiply_rows(ROWS, metadata={"sleep": 0.15})
        )
        self.args = (
            *CONFIG, "--dataset-file", str(dataset), "--limit", str(ROWS), "--name", name,
        )  # fmt: skip
        folder = workspace / ".osmosis" / "evals" / name
        self.events = folder / "events.jsonl"
        self.log = folder / "logs.txt"
        self.records: list[dict[str, object]] = []
        #: (signal, when, delay in s, its exit status, items journaled after it), per stop.
        self.history: list[tuple[str, str, float, int | None, int]] = []

    def stop_once(self, signum: signal.Signals) -> None:
        # A third of the stops land while the server starts, the others once it is healthy:
        # the random moment counts from the run's first log line, or from the line saying
        # the server is healthy, not from the process start, so a slow, loaded machine
        # still stops it where it was meant to.
        during = self.rng.choice(["start-up", "run", "run"])
        delay = self.rng.uniform(0.2, 2.5) if during == "run" else self.rng.uniform(0.0, 1.5)
        logged = self.log.stat().st_size if self.log.exists() else 0
        run = start_eval(*self.args, "--max-in-flight", "4", cwd=self.workspace)
        eventually_sync(partial(grew_past, self.log, logged), "the run to start")
        if during == "run":
            eventually_sync(
                lambda: run.process.poll() is not None or healthy_since(self.log, logged),
                "the launched server to be healthy",
            )
        time.sleep(delay)
        run.send_signal(signum)
        _, stderr = run.finish()
        if signum != signal.SIGKILL:
            # A graceful stop: interrupted (1), or finished first (0); never a traceback.
            assert run.returncode in (0, 1), f"seed {self.seed}: {signum!r}\n{stderr}"
            assert "Traceback" not in stderr, stderr
        records = journal_lines(self.events)
        self.history.append((signum.name, during, round(delay, 2), run.returncode, len(records)))
        where = f"seed {self.seed}, stops {self.history}"
        assert records[: len(self.records)] == self.records, f"{where}: a record was lost"
        keys = Counter((r["row_index"], r["run_index"]) for r in records)
        duplicated = [key for key, count in keys.items() if count > 1]
        assert not duplicated, f"{where}: items journaled twice {duplicated}"
        self.records = records
        self.no_server_left(where)

    def no_server_left(self, where: str) -> None:
        """Every server this run launched is gone, with whatever ran in its folder."""
        pids = server_pids(self.log.read_text()) if self.log.exists() else []
        eventually_sync(
            lambda: not [pid for pid in pids if alive(pid)] and not processes_in(self.rollout),
            f"{where}: every launched server gone (pids {pids})",
            timeout=30,
        )

    def complete(self) -> None:
        """A last resume runs what is left; every item is then journaled exactly once."""
        final = run_eval(*self.args, "--max-in-flight", "4", "--json", cwd=self.workspace)
        where = f"seed {self.seed}, stops {self.history}"
        assert final.returncode == 0, f"{where}\n{final.stderr}"
        summary = summary_of(final.stdout)
        assert summary["items"]["done"] == ROWS
        records = journal_lines(self.events)
        assert records[: len(self.records)] == self.records, f"{where}: a record was lost"
        assert Counter(r["row_index"] for r in records) == Counter(range(ROWS)), where
        assert all(r["status"] == "success" for r in records)
        assert summary["items"]["resumed"] == len(self.records)
        self.no_server_left(where)


def test_sigkill_at_random_moments_loses_tears_duplicates_and_orphans_nothing(
    workspace: Path,
) -> None:
    loop = StopLoop(workspace, "killed", random.randrange(1 << 30))
    for _ in range(KILLS):
        loop.stop_once(signal.SIGKILL)
    loop.complete()
    print(
        f"kill loop: seed {loop.seed}, {KILLS} SIGKILLs (signal, when, delay s, exit, journaled):"
    )
    print(f"  {loop.history}")
    # The kills did land at different moments: some before anything finished, some later.
    counts = {journaled for *_, journaled in loop.history}
    assert len(counts) > 1 or loop.history[-1][-1] == ROWS, loop.history


def test_sigterm_sigint_and_sighup_at_random_moments_lose_and_orphan_nothing(
    workspace: Path,
) -> None:
    loop = StopLoop(workspace, "stopped", random.randrange(1 << 30))
    for _ in range(SIGNALS):
        loop.stop_once(loop.rng.choice(GRACEFUL))
    loop.complete()
    print(
        f"signal loop: seed {loop.seed}, {SIGNALS} stops (signal, when, delay s, exit, journaled):"
    )
    print(f"  {loop.history}")
