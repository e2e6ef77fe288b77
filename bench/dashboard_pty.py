"""The dashboard's cost: the eval of `bench.eval_e2e` with the dashboard open in a real
pseudo-terminal, against the same eval headless.

Throughput is rollouts per second between the first and the last finished rollout (from the
run's logs.txt), so that start-up, which both share, does not count. While the dashboard run
is in progress, `s` (the next sort order) is pressed through the terminal once a second,
and the time until the terminal receives the status line naming the new order is the
key-to-repaint latency: what a user sees, through Textual's whole input and output path. Runs
alternate; medians are kept. When every rollout has finished, `q` leaves the dashboard.

`python -m bench.dashboard_pty` runs it alone; `make bench` includes it.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

from bench.drive import percentile
from bench.eval_e2e import ATTEMPTS, command, log_lines, make_workspace, stub_model, venv_python
from bench.table import Figure, ms, ratio
from tui.widgets.table.sorting import Sort, describe, next_sort

COLUMNS, LINES = 160, 48
# One key a second: a user's pace, so that the keys do not become the load being measured.
KEY_INTERVAL_SEC = 1.0
KEY_TIMEOUT_SEC = 5.0
# Control sequences (CSI, OSC, two-character escapes), removed before looking for text.
_ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b.")


class Terminal:
    """A pseudo-terminal running a command; what it prints is read all along, with times."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env={**env, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(LINES)},
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self._master = master
        self._text = bytearray()  # what it printed, control sequences removed
        self._lock = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                with self._lock:
                    self._lock.notify_all()
                return
            pending += chunk
            # A control sequence cut at the chunk's end waits for the rest.
            cut = pending.rfind(b"\x1b")
            keep = pending[cut:] if cut >= 0 and len(pending) - cut < 32 else b""
            usable = pending[: len(pending) - len(keep)]
            pending = keep
            with self._lock:
                self._text += _ESCAPES.sub(b"", usable)
                self._lock.notify_all()

    def mark(self) -> int:
        with self._lock:
            return len(self._text)

    def wait_for(self, text: str, since: int, timeout: float) -> float | None:
        """When `text` appeared in what was printed after `since` (time.monotonic()), or None."""
        wanted = text.encode()
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                if self._text.find(wanted, since) >= 0:
                    return time.monotonic()
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive():
                    return None
                self._lock.wait(left)

    def press(self, key: str) -> None:
        os.write(self._master, key.encode())

    def close(self) -> int:
        try:
            return self.process.wait(60)
        finally:
            os.close(self._master)


def _throughput(folder: Path) -> tuple[float, int]:
    results = [at for at, step in log_lines(folder / "logs.txt") if step == "result"]
    if len(results) < 2:
        return 0.0, len(results)
    return (len(results) - 1) / (max(results) - min(results)), len(results)


def _finished(folder: Path) -> int:
    events = folder / "events.jsonl"
    return len(events.read_text().splitlines()) if events.is_file() else 0


def run_headless(python: str, workspace: Path, model: str, output: Path) -> dict[str, Any]:
    argv, env = command("ours", python, model, output)
    done = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, check=False)
    rate, finished = _throughput(output / "run")
    return {"exit": done.returncode, "rollouts_per_s": rate, "finished": finished}


def run_dashboard(
    python: str, workspace: Path, model: str, output: Path, total: int
) -> dict[str, Any]:
    argv, env = command("ours", python, model, output)
    argv.remove("--headless")
    # A config folder of its own: the dashboard starts from the default sort, and the sort it
    # remembers at the end is not written into the user's settings.
    env["XDG_CONFIG_HOME"] = str((output / "config").resolve())
    terminal = Terminal(argv, cwd=workspace, env=env)
    folder = output / "run"
    latencies: list[float] = []
    missed = 0
    sort = Sort()
    try:
        # Keys only while rollouts are running: from the first finished one to the last.
        while _finished(folder) == 0 and terminal.process.poll() is None:
            time.sleep(0.05)
        while _finished(folder) < total and terminal.process.poll() is None:
            sort = next_sort(sort)
            since = terminal.mark()
            sent = time.monotonic()
            terminal.press("s")
            seen = terminal.wait_for(f"sort: {describe(sort)}", since, KEY_TIMEOUT_SEC)
            if seen is None:
                missed += 1
            else:
                latencies.append(seen - sent)
            time.sleep(KEY_INTERVAL_SEC)
        terminal.press("q")
    finally:
        code = terminal.close()
    rate, finished = _throughput(folder)
    return {
        "exit": code,
        "rollouts_per_s": rate,
        "finished": finished,
        "keys": len(latencies),
        "keys_missed": missed,
        "key_p50_ms": (percentile(latencies, 0.5) or 0) * 1000,
        "key_p99_ms": (percentile(latencies, 0.99) or 0) * 1000,
        "key_latencies_ms": [round(value * 1000, 1) for value in latencies],
    }


def measure(rows: int, repeats: int) -> dict[str, Any]:
    python = venv_python()
    total = rows * ATTEMPTS
    runs: dict[str, list[dict[str, Any]]] = {"headless": [], "dashboard": []}
    with tempfile.TemporaryDirectory(prefix="bench-pty-") as tmp, stub_model(python) as (_, model):
        workspace = make_workspace(Path(tmp) / "workspace", rows)
        for repeat in range(repeats):
            for mode in ("headless", "dashboard") if repeat % 2 == 0 else ("dashboard", "headless"):
                output = Path(tmp) / f"out-{mode}-{repeat}"
                if mode == "headless":
                    run = run_headless(python, workspace, model, output)
                else:
                    run = run_dashboard(python, workspace, model, output, total)
                runs[mode].append(run)
                keys = f", key p99 {run['key_p99_ms']:.0f} ms" if mode == "dashboard" else ""
                print(
                    f"  {mode:>9}: exit {run['exit']}, {run['finished']} finished, "
                    f"{run['rollouts_per_s']:.1f} rollouts/s{keys}",
                    flush=True,
                )
                shutil.rmtree(output, ignore_errors=True)
    headless = statistics.median(run["rollouts_per_s"] for run in runs["headless"])
    dashboard = statistics.median(run["rollouts_per_s"] for run in runs["dashboard"])
    every_key = [value for run in runs["dashboard"] for value in run["key_latencies_ms"]]
    return {
        "rollouts": total,
        "headless_rollouts_per_s": headless,
        "dashboard_rollouts_per_s": dashboard,
        "keys": len(every_key),
        "keys_missed": sum(run["keys_missed"] for run in runs["dashboard"]),
        "key_p50_ms": percentile(every_key, 0.5) or 0.0,
        "key_p99_ms": percentile(every_key, 0.99) or 0.0,
        "failures": sum(
            run["exit"] != 0 or run["finished"] != total for mode in runs for run in runs[mode]
        ),
        "runs": runs,
    }


def figures(result: dict[str, Any]) -> list[Figure]:
    share = ratio(result["dashboard_rollouts_per_s"], result["headless_rollouts_per_s"])
    where = f"dashboard in a pty, same eval ({result['rollouts']} rollouts)"
    found = [
        Figure(
            f"{where}: throughput vs headless",
            f"{result['dashboard_rollouts_per_s']:.1f}/s ({share:.2f}x)",
            "",
            ">= 0.95x headless",
            share >= 0.95,
        ),
        Figure(
            f"{where}: key-to-repaint p50 / p99 ({result['keys']} keys)",
            f"{ms(result['key_p50_ms'])} / {ms(result['key_p99_ms'])}",
            "",
            "p99 < 100 ms",
            result["key_p99_ms"] < 100 and not result["keys_missed"],
        ),
    ]
    if result["failures"] or result["keys_missed"]:
        found.append(
            Figure(
                f"{where}: failed runs / keys never repainted",
                f"{result['failures']} / {result['keys_missed']}",
                "",
                "0 / 0",
                False,
            )
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    result = measure(args.rows, args.repeats)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))
    from bench.table import format_table

    print(format_table(figures(result)))


if __name__ == "__main__":
    main()
