"""Child processes for the benchmarks: start, wait for READY, read CPU and memory, stop."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far, from /proc (no psutil needed)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def open_sockets(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except OSError:
            continue
    return count


@contextmanager
def started(argv: list[str], *, env: dict[str, str] | None = None) -> Iterator[tuple[int, int]]:
    """Run `argv` until the block ends; yields (pid, port) once it printed `READY <port>`."""
    process = subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if line.startswith("READY"):
                break
            if process.poll() is not None:
                raise RuntimeError(f"{argv} exited with {process.returncode}")
        else:
            raise RuntimeError(f"{argv} did not become ready")
        # Keep draining stdout so a chatty server can never block on a full pipe.
        threading.Thread(target=process.stdout.read, daemon=True).start()
        yield process.pid, int(line.split()[1])
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
