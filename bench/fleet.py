"""Fleet: one eval driving 32 rollout servers behind one name, 4,000 rollouts in flight, with
servers added to the name and removed from it while it runs (issue 27 item 5).

Processes: the stub model (answering after 4 to 12 s, as in `scale.py`, so rollouts stay in
flight and end steadily), 36 of our rollout servers running the benchmark rollout, each on
an address of its own in 127.0.0.0/8 and one port, and the eval: an `EvalSession` (what
`osmosis-tui eval --server http://NAME:PORT --headless` runs) given the one name, in a process
of its own, in a mount namespace whose /etc/hosts is the benchmark's file (`unshare -m`, as
root): the system's resolver answers the name with the addresses the file lists. The file
lists 32 servers at the start; a third into the run 4 of them leave it and 4 others join
(edited in place, as /etc/hosts is): the run finds out within its 5 s look, sends the new ones
work, and lets the old ones finish what they hold.

Reported: failures (a work item without a successful result), the servers the run sent work
to (all 36 expected), throughput, the eval's CPU per rollout (the controller's cost) and the
servers', the eval's memory per rollout in flight, and event-loop lag. Not in `make bench`
(36 processes for a few minutes): `python -m bench.fleet`; smaller with
`--servers/--total/--in-flight`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.procs import ROOT, cpu_seconds, started
from bench.scale import MODEL_JITTER_SEC, MODEL_LATENCY_SEC, run_eval
from bench.table import Figure, format_table, ms

if TYPE_CHECKING:
    from core.eval import EvalSession

NAME = "fleet.bench"
#: Servers swapped a third into the run: this many leave the name, as many join it.
SWAPPED = 4
#: The first address's last byte: 127.0.0.FIRST and on.
FIRST = 11
# Runs the command after it with the hosts file ($0) in place of /etc/hosts, for it alone.
WITH_HOSTS = ("unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"')


def address(index: int) -> str:
    return f"127.0.0.{FIRST + index}"


def hosts(indices: range) -> str:
    return "127.0.0.1 localhost\n" + "".join(f"{address(i)} {NAME}\n" for i in indices)


def free_port_everywhere(count: int) -> int:
    """A port free on each of the `count` addresses."""
    while True:
        probe = socket.socket()
        probe.bind((address(0), 0))
        port = int(probe.getsockname()[1])
        probe.close()
        try:
            for index in range(count):
                with socket.socket() as other:
                    other.bind((address(index), port))
        except OSError:
            continue
        return port


def edit_in_place(path: Path, text: str) -> None:
    with path.open("r+") as edited:
        edited.truncate(0)
        edited.write(text)


def servers_used(session: EvalSession) -> dict[str, Any]:
    """The eval's own account of where its rollouts went (by the URL each was sent to)."""
    by_server = Counter(record.server for record in session.board)
    failed = (
        record.latest_result
        for record in session.board
        if record.latest_result is not None and record.latest_result.err_message
    )
    first = next(failed, None)
    return {
        "servers_used": len(by_server),
        "fewest_on_a_server": min(by_server.values()),
        "a_failure": None if first is None else first.err_message,
    }


def measure(py: str, servers: int, total: int, in_flight: int) -> dict[str, Any]:
    count = servers + SWAPPED
    port = free_port_everywhere(count)
    with ExitStack() as stack:
        _chat_pid, chat_port = stack.enter_context(
            started(
                [
                    *(py, "bench/servers.py", "chat"),
                    *("--latency", str(MODEL_LATENCY_SEC), "--jitter", str(MODEL_JITTER_SEC)),
                ]
            )
        )
        pids = [
            stack.enter_context(
                started(
                    [
                        *(py, "bench/servers.py", "rollout", "--impl", "ours"),
                        *("--host", address(index), "--port", str(port)),
                    ]
                )
            )[0]
            for index in range(count)
        ]
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-fleet-")))
        hosts_file = tmp / "hosts"
        hosts_file.write_text(hosts(range(servers)))
        cpu0 = [cpu_seconds(pid) for pid in pids]
        command = [
            *WITH_HOSTS,
            str(hosts_file),
            *(py, "-m", "bench.fleet", "--eval", "--server", f"http://{NAME}:{port}"),
            *("--chat-url", f"http://127.0.0.1:{chat_port}/v1"),
            *("--total", str(total), "--in-flight", str(in_flight), "--folder", str(tmp)),
        ]
        out = tmp / "eval.out"
        with out.open("w") as stdout:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=stdout,
                stderr=subprocess.DEVNULL,
            )
            events = tmp / "out" / "fleet" / "events.jsonl"
            # A third of the way through: 4 servers leave the name, 4 others join it.
            while process.poll() is None:
                done = len(events.read_bytes().splitlines()) if events.exists() else 0
                if done >= total // 3:
                    edit_in_place(hosts_file, hosts(range(SWAPPED, servers + SWAPPED)))
                    break
                time.sleep(0.5)
            process.wait()
        if process.returncode != 0:
            raise RuntimeError(f"the fleet's eval exited with {process.returncode}")
        result = dict(json.loads(out.read_text().strip().splitlines()[-1]))
        result["servers"] = servers
        result["server_cpu_ms_per_rollout"] = (
            sum(cpu_seconds(pid) - before for pid, before in zip(pids, cpu0, strict=True))
            / total
            * 1000
        )
    return result


def figures(result: dict[str, Any]) -> list[Figure]:
    where = (
        f"fleet: {result['rollouts']} rollouts, {result['most_in_flight']} in flight over "
        f"{result['servers']} servers behind one name, {SWAPPED} swapped mid-run"
    )
    expected = result["servers"] + SWAPPED
    return [
        Figure(
            f"{where}: failures",
            f"{result['failures']} {result['failure_kinds'] or ''}".strip(),
            "",
            "0",
            result["failures"] == 0,
        ),
        Figure(
            f"{where}: servers sent work (fewest rollouts on one)",
            f"{result['servers_used']} ({result['fewest_on_a_server']})",
            "",
            f"{expected}",
            result["servers_used"] == expected,
        ),
        Figure(
            f"{where}: throughput, eval / servers CPU per rollout",
            f"{result['rollouts_per_s']:.0f}/s, {ms(result['eval_cpu_ms_per_rollout'])} / "
            f"{ms(result['server_cpu_ms_per_rollout'])}",
        ),
        Figure(
            f"{where}: eval memory per rollout in flight",
            f"{result['kb_per_rollout_in_flight']:.0f} KiB "
            f"(RSS {result['rss_baseline_mb']:.0f} -> {result['rss_peak_mb']:.0f} MB)",
        ),
        Figure(
            f"{where}: event-loop lag p50 / p99",
            f"{ms(result['loop_lag_p50_ms'])} / {ms(result['loop_lag_p99_ms'])}",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--eval", action="store_true", help="run the eval process")
    parser.add_argument("--server")
    parser.add_argument("--chat-url")
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--servers", type=int, default=32)
    parser.add_argument("--total", type=int, default=12000)
    parser.add_argument("--in-flight", type=int, default=4000)
    args = parser.parse_args()
    if args.eval:
        result = asyncio.run(
            run_eval(
                [args.server],
                args.chat_url,
                args.total,
                args.in_flight,
                args.folder,
                name="fleet",
                after=servers_used,
            )
        )
        print(json.dumps(result))
        return
    if os.geteuid() != 0:
        sys.exit("bench.fleet needs root: the eval runs in a mount namespace of its own")
    from bench.run import venv_python

    result = measure(venv_python(), args.servers, args.total, args.in_flight)
    print(json.dumps(result, indent=1))
    print(format_table(figures(result)))


if __name__ == "__main__":
    main()
