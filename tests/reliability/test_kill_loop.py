"""`osmosis-tui eval` stopped at random moments, again and again on the same run (issues 7, 15).

Each run launches the workspace's own rollout server (`uv run`, behind the lifeline's guard),
and is stopped at a random moment of start-up, run or wind-down: by SIGKILL in one loop, by a
mix of SIGTERM, SIGINT and SIGHUP (graceful stops) in the other. After every stop:

- the journal holds whole records only (a torn tail can only be the very last write) and
  never two for one work item: nothing torn, nothing duplicated;
- every record journaled before is still there, unchanged and in order: nothing lost;
- no process of any launched server is left (checked by the PIDs the servers print, and by
  every process working in the rollout's folder).

A third loop kills by SIGKILL while a viewer attached to the run's control socket (the
`osmosis-tui attach` client) steers it: it pauses and resumes the dispatch, changes the
max-in-flight, cancels and requeues rollouts in flight, up to the kill; the same holds after
each kill, and a cancelled or requeued attempt is never the item's record.

A last resume completes the run with every item exactly once. CI stops 5 times by SIGKILL, 3
times by signals and 3 times by SIGKILL with a viewer steering; `make soak` (OSMOSIS_SOAK=full)
25, 12 and 25 times.

tests/eval/results/test_events.py kills a bare journal writer in a loop; tests/eval/runs/
test_resume.py and test_workspace.py stop one eval once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

from core.eval.attach.client import ControlActionError, ControlClient, ControlLost
from core.eval.attach.unix_socket import ControlError
from tests.eval.runs.command import alive, processes_in, run_eval, server_pids, start_eval
from tests.eval.runs.files import multiply_rows, summary_of, write_jsonl
from tests.polling import eventually_sync
from tests.reliability.counts import FULL, scaled

KILLS = scaled(5, 25)
SIGNALS = scaled(3, 12)
STEERED_KILLS = scaled(3, 25)
#: What the attached viewer asks of the run, one at random every 50-300 ms.
STEERING = ("pause", "resume", "max_in_flight", "cancel", "requeue")
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
        self.folder = folder
        self.events = folder / "events.jsonl"
        self.log = folder / "logs.txt"
        self.records: list[dict[str, object]] = []
        #: (signal, when, delay in s, its exit status, items journaled after it), per stop.
        self.history: list[tuple[str, str, float, int | None, int]] = []
        #: The attached viewer's actions the run carried out, and those it refused, by name.
        self.steered: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()

    def stop_once(
        self, signum: signal.Signals, *, steer: bool = False, during: str | None = None
    ) -> None:
        """Start the run and stop it with `signum` at a random moment (`during` start-up or the
        run, else at random); with `steer`, a viewer attached to it steers it until then."""
        # A third of the stops land while the server starts, the others once it is healthy:
        # the random moment counts from the run's first log line, or from the line saying
        # the server is healthy, not from the process start, so a slow, loaded machine
        # still stops it where it was meant to.
        during = during or self.rng.choice(["start-up", "run", "run"])
        delay = self.rng.uniform(0.2, 2.5) if during == "run" else self.rng.uniform(0.0, 1.5)
        logged = self.log.stat().st_size if self.log.exists() else 0
        run = start_eval(*self.args, "--max-in-flight", "4", cwd=self.workspace)
        eventually_sync(partial(grew_past, self.log, logged), "the run to start")
        if during == "run":
            eventually_sync(
                lambda: run.process.poll() is not None or healthy_since(self.log, logged),
                "the launched server to be healthy",
            )
        if steer:
            asyncio.run(self.steer(delay, partial(run.send_signal, signum)))
        else:
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

    async def steer(self, delay: float, stop: Callable[[], None]) -> None:
        """Attach to the run as soon as its control socket answers and steer it for `delay`
        seconds, then `stop` it while still attached: the viewer sees the run lost (or over,
        had it ended first)."""
        deadline = time.monotonic() + delay
        client: ControlClient | None = None
        while client is None and time.monotonic() < deadline:
            try:
                client = await asyncio.wait_for(
                    ControlClient.connect(self.folder), deadline - time.monotonic()
                )
            except (ControlError, TimeoutError):
                # No socket yet, the last run's stale one, or the run still starting.
                await asyncio.sleep(0.05)
        if client is None:
            stop()
            return
        following = asyncio.ensure_future(client.follow())
        try:
            while time.monotonic() < deadline and not client.over:
                await self.act(client)
                await asyncio.sleep(self.rng.uniform(0.05, 0.3))
            stop()
            await asyncio.wait_for(following, 30)
            assert client.lost is not None or client.ending is not None
        finally:
            following.cancel()
            with contextlib.suppress(BaseException):
                await following
            await client.close()

    async def act(self, client: ControlClient) -> None:
        """One action at random, as a dashboard attached to the run sends it."""
        action = self.rng.choice(STEERING)
        in_flight = [r.rollout_id for r in client.board if r.in_flight]
        try:
            if action == "pause":
                await client.pause()
            elif action == "resume":
                await client.resume()
            elif action == "max_in_flight":
                await client.set_max_in_flight(self.rng.randint(1, 6))
            elif not in_flight:
                return
            elif action == "cancel":
                await client.cancel([self.rng.choice(in_flight)])
            else:
                await client.requeue(self.rng.choice(in_flight))
        except ControlActionError:
            # What the run cannot do now (a limit before its servers are up, a requeue of
            # a rollout that has just ended): refused, the run goes on as it was.
            self.refused[action] += 1
        except ControlLost:
            return  # the run ended meanwhile
        else:
            self.steered[action] += 1

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


def test_sigkill_while_an_attached_viewer_steers_loses_tears_duplicates_and_orphans_nothing(
    workspace: Path,
) -> None:
    loop = StopLoop(workspace, "steered", random.randrange(1 << 30))
    for kill in range(STEERED_KILLS):
        # The first kill lands once the server is healthy, so the viewer surely steers.
        loop.stop_once(signal.SIGKILL, steer=True, during="run" if kill == 0 else None)
    loop.complete()
    print(
        f"steered kill loop: seed {loop.seed}, {STEERED_KILLS} SIGKILLs "
        "(signal, when, delay s, exit, journaled):"
    )
    print(f"  {loop.history}")
    print(f"  actions carried out {dict(loop.steered)}, refused {dict(loop.refused)}")
    assert loop.steered, "the viewer steered the run"
