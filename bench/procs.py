"""Child processes for the benchmarks: start, wait for READY, read CPU and memory, stop."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
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


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, user + system CPU seconds) of a live process, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS


def _role(pid: int, root: int) -> str:
    """What a process of the tree is, from its command line (for the CPU breakdown)."""
    if pid == root:
        return "eval"
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "other"
    words = [Path(arg.decode(errors="replace")).name for arg in argv if arg]
    if not words:
        return "other"
    if words[0] in ("uv", "uvx"):
        return "uv"
    if any(word.endswith(".py") for word in words[1:3]):
        return "rollout server"
    if words[1:2] == ["-c"]:
        return f"{words[0]} -c"  # a probe (the launcher's version check)
    return words[0]


class TreeCpu:
    """The CPU of a process and of every process below it, sampled from /proc while it runs.

    Each process's last reading counts, so a child that exits between two samples loses at
    most one interval; `by_role` splits the total by what each process is."""

    def __init__(self, root: int, *, interval_sec: float = 0.1) -> None:
        self.root = root
        self._interval = interval_sec
        self._cpu: dict[int, float] = {}
        self._roles: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeCpu:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)

    def sample(self) -> None:
        children: dict[int, list[int]] = {}
        cpu: dict[int, float] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            found = _stat(entry.name)
            if found is not None:
                pid = int(entry.name)
                children.setdefault(found[0], []).append(pid)
                cpu[pid] = found[1]
        todo = [self.root]
        while todo:
            pid = todo.pop()
            if pid in cpu:
                self._cpu[pid] = max(self._cpu.get(pid, 0.0), cpu[pid])
                if pid not in self._roles:
                    self._roles[pid] = _role(pid, self.root)
            todo.extend(children.get(pid, ()))

    @property
    def total(self) -> float:
        return sum(self._cpu.values())

    def by_role(self) -> dict[str, float]:
        roles: dict[str, float] = {}
        for pid, seconds in self._cpu.items():
            role = self._roles.get(pid, "other")
            roles[role] = roles.get(role, 0.0) + seconds
        return roles


@dataclass(frozen=True)
class MultiplyFleet:
    """The stub model and rollout servers running the benchmark rollout, started for one
    measurement, and a temporary folder for its run."""

    chat_url: str
    servers: list[str]
    folder: Path


def multiply_fleet(stack: ExitStack, py: str, servers: int, *, prefix: str) -> MultiplyFleet:
    """Start the stub model (answering at once) and `servers` of our rollout servers, and make
    a temporary folder; `stack` stops and removes them."""
    _chat_pid, chat_port = stack.enter_context(started([py, "bench/servers.py", "chat"]))
    ports = [
        stack.enter_context(started([py, "bench/servers.py", "rollout", "--impl", "ours"]))[1]
        for _ in range(servers)
    ]
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
    return MultiplyFleet(
        f"http://127.0.0.1:{chat_port}/v1", [f"http://127.0.0.1:{port}" for port in ports], folder
    )
