"""Scale: one eval keeping 2,000 rollouts in flight over 4 server_stub processes.

Processes: the stub model (answering after 4 to 12 s, so that rollouts stay in flight and
end steadily rather than in waves), four of our rollout servers running the benchmark rollout
(`bench/workflow.py`, whose chat call goes through the eval's model gateway), and the eval:
an `EvalSession` (what `osmosis-tui eval --server ... --headless` runs) in a process of its
own, without events (servers started without an OTLP endpoint, so every status comes from
the polls).

Reported: failures; memory per rollout in flight (the eval's resident memory at its peak, less
what it held once its servers were reached, over the rollouts in flight); observation latency,
how long after the server's status change the eval's board knew it (the rollout's own clock
marks, `time.monotonic()`, which every process on the machine shares, against the handle's);
and throughput.

`python -m bench.scale` runs it alone (smaller with `--total/--in-flight`); `make bench`
includes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.drive import percentile
from bench.procs import ROOT, cpu_seconds, started
from bench.table import Figure, ms

if TYPE_CHECKING:
    from core.eval import EvalPlan, EvalSession

SERVERS = 4
# Spread, so that rollouts end (and the next ones start) steadily rather than in waves.
MODEL_LATENCY_SEC = 8.0
MODEL_JITTER_SEC = 4.0
_PAGE_KB = 4


def _rss_mb() -> float:
    fields = Path("/proc/self/statm").read_text().split()
    return int(fields[1]) * _PAGE_KB / 1024


class PeakMemory:
    """This process's resident memory, sampled; `mark()` takes the baseline."""

    def __init__(self) -> None:
        self.baseline = _rss_mb()
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def mark(self) -> None:
        self.baseline = self.peak = _rss_mb()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, _rss_mb())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def multiply_session(
    servers: list[str], chat_url: str, total: int, in_flight: int, folder: Path, *, name: str
) -> EvalSession:
    """An eval (run `name`, under `folder`) of `total` rows asking the product of two numbers
    (the benchmark rollout's task), over `servers`, `in_flight` at once."""
    from core.eval import EvalSession

    return EvalSession(multiply_plan(servers, chat_url, total, in_flight, folder, name=name))


def write_multiply_dataset(path: Path, rows: int) -> Path:
    """`rows` multiplication questions (the same ones each time), as a JSONL dataset."""
    pick = random.Random(5)
    with path.open("w") as out:
        for _ in range(rows):
            a, b = pick.randint(2, 99), pick.randint(2, 99)
            out.write(
                json.dumps({"user_prompt": f"What is {a} * {b}?", "ground_truth": str(a * b)})
            )
            out.write("\n")
    return path


def multiply_plan(
    servers: list[str], chat_url: str, total: int, in_flight: int, folder: Path, *, name: str
) -> EvalPlan:
    """The plan of `multiply_session`'s eval (its dataset written under `folder`)."""
    from core.eval import EvalRequest, prepare

    dataset = write_multiply_dataset(folder / "rows.jsonl", total)
    return prepare(
        EvalRequest(
            dataset_file=dataset,
            servers=tuple(servers),
            chat_url=chat_url,
            max_in_flight=in_flight,
            output=folder / "out",
            name=name,
        )
    )


async def run_eval(
    servers: list[str],
    chat_url: str,
    total: int,
    in_flight: int,
    folder: Path,
    *,
    name: str = "scale",
    after: Callable[[EvalSession], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The eval process (run `name`): `total` rollouts over `servers`, `in_flight` at once;
    `after(session)` adds its own figures once the run is over."""
    from core.eval.gc_tuning import settled_for_a_run

    session = multiply_session(servers, chat_url, total, in_flight, folder, name=name)
    memory = PeakMemory()
    most_in_flight = 0

    async def watch() -> None:
        nonlocal most_in_flight
        while session.runner is None:  # noqa: ASYNC110 - the session has no event for it
            await asyncio.sleep(0.05)
        memory.mark()  # servers reached, gateway up: what the rollouts add is on top
        while True:
            pool = session.pool
            if pool is not None:
                now = sum(slot.in_flight for slot in pool.slots)
                most_in_flight = max(most_in_flight, now)
            await asyncio.sleep(0.5)

    lags: list[float] = []

    async def lag() -> None:
        # How late the eval's event loop runs a timer: what every observation waits for too.
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.05)
            lags.append(time.monotonic() - before - 0.05)

    watcher = asyncio.ensure_future(watch())
    lagger = asyncio.ensure_future(lag())
    cpu0, t0 = time.process_time(), time.monotonic()
    with settled_for_a_run():  # as `osmosis-tui eval` runs
        summary = await session.run()
    wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
    watcher.cancel()
    lagger.cancel()
    memory.stop()
    seen_running: list[float] = []
    seen_terminal: list[float] = []
    admitted = sorted(session.board, key=lambda record: record.submitted_at or 0.0)
    for record in admitted[in_flight:]:
        # What the handle observed: a finished rollout's record keeps it once the handle goes.
        result = record.observed.latest_result
        metrics = result.sample.metrics if result is not None and result.sample else {}
        if "started" not in metrics:
            continue
        for transition in record.transitions:
            if transition.status.value == "running":
                seen_running.append(transition.at - metrics["started"])
            elif transition.status.value == "success":
                seen_terminal.append(transition.at - metrics["ended"])
    failed = [r for r in summary.results.values() if r.status != "success"]
    return {
        **({} if after is None else after(session)),
        "rollouts": total,
        "in_flight": in_flight,
        "most_in_flight": most_in_flight,
        "status": summary.status,
        "finished": len(summary.results),
        "failures": len(failed) + (total - len(summary.results)),
        "failure_kinds": sorted({str(r.error_type) for r in failed})[:5],
        "wall_s": wall,
        "rollouts_per_s": total / wall,
        "eval_cpu_ms_per_rollout": cpu / total * 1000,
        "loop_lag_p50_ms": (percentile(lags, 0.5) or 0) * 1000,
        "loop_lag_p99_ms": (percentile(lags, 0.99) or 0) * 1000,
        "rss_baseline_mb": memory.baseline,
        "rss_peak_mb": memory.peak,
        "kb_per_rollout_in_flight": (memory.peak - memory.baseline) * 1024 / max(most_in_flight, 1),
        "observe_running_p50_ms": (percentile(seen_running, 0.5) or 0) * 1000,
        "observe_running_p99_ms": (percentile(seen_running, 0.99) or 0) * 1000,
        "observed_running_share": len(seen_running) / max(len(seen_terminal), 1),
        "observe_terminal_p50_ms": (percentile(seen_terminal, 0.5) or 0) * 1000,
        "observe_terminal_p99_ms": (percentile(seen_terminal, 0.99) or 0) * 1000,
    }


def measure(py: str, total: int, in_flight: int, servers_count: int = SERVERS) -> dict[str, Any]:
    with ExitStack() as stack:
        _chat_pid, chat_port = stack.enter_context(
            started(
                [
                    *(py, "bench/servers.py", "chat"),
                    *("--latency", str(MODEL_LATENCY_SEC), "--jitter", str(MODEL_JITTER_SEC)),
                ]
            )
        )
        servers = [
            stack.enter_context(started([py, "bench/servers.py", "rollout", "--impl", "ours"]))
            for _ in range(servers_count)
        ]
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-scale-")))
        cpu0 = [cpu_seconds(pid) for pid, _ in servers]
        urls = ",".join(f"http://127.0.0.1:{port}" for _, port in servers)
        out = subprocess.run(
            [
                py,
                "-m",
                "bench.scale",
                "--eval",
                *("--servers", urls),
                *("--chat-url", f"http://127.0.0.1:{chat_port}/v1"),
                *("--total", str(total), "--in-flight", str(in_flight), "--folder", str(tmp)),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        result = dict(json.loads(out.stdout.strip().splitlines()[-1]))
        result["servers"] = servers_count
        result["server_cpu_ms_per_rollout"] = (
            sum(cpu_seconds(pid) - before for (pid, _), before in zip(servers, cpu0, strict=True))
            / total
            * 1000
        )
    return result


def figures(result: dict[str, Any]) -> list[Figure]:
    where = (
        f"scale: {result['rollouts']} rollouts, {result['most_in_flight']} in flight "
        f"over {result.get('servers', SERVERS)} servers"
    )
    return [
        Figure(
            f"{where}: failures",
            f"{result['failures']} {result['failure_kinds'] or ''}".strip(),
            "",
            "0",
            result["failures"] == 0,
        ),
        Figure(
            f"{where}: eval memory per rollout in flight",
            f"{result['kb_per_rollout_in_flight']:.0f} KiB "
            f"(RSS {result['rss_baseline_mb']:.0f} -> {result['rss_peak_mb']:.0f} MB)",
        ),
        Figure(
            f"{where}: observation, terminal p50 / p99",
            f"{ms(result['observe_terminal_p50_ms'])} / {ms(result['observe_terminal_p99_ms'])}",
            "",
            "p99 < 50 ms",
            result["observe_terminal_p99_ms"] < 50,
        ),
        Figure(
            f"{where}: observation, running p50 / p99 "
            f"({result['observed_running_share']:.0%} seen)",
            f"{ms(result['observe_running_p50_ms'])} / {ms(result['observe_running_p99_ms'])}",
            "",
            "p99 < 50 ms",
            result["observe_running_p99_ms"] < 50,
        ),
        Figure(
            f"{where}: throughput, eval / servers CPU per rollout",
            f"{result['rollouts_per_s']:.0f}/s, {ms(result['eval_cpu_ms_per_rollout'])} / "
            f"{ms(result['server_cpu_ms_per_rollout'])}",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--eval", action="store_true", help="run the eval process")
    parser.add_argument("--servers")
    parser.add_argument("--chat-url")
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--total", type=int, default=6000)
    parser.add_argument("--in-flight", type=int, default=2000)
    parser.add_argument("--servers-count", type=int, default=SERVERS, help="rollout servers")
    args = parser.parse_args()
    if args.eval:
        result = asyncio.run(
            run_eval(
                args.servers.split(","), args.chat_url, args.total, args.in_flight, args.folder
            )
        )
        print(json.dumps(result))
        return
    from bench.run import venv_python
    from bench.table import format_table

    result = measure(venv_python(), args.total, args.in_flight, args.servers_count)
    print(json.dumps(result, indent=1))
    print(format_table(figures(result)))


if __name__ == "__main__":
    main()
