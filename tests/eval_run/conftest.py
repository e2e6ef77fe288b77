"""Helpers for the `osmosis-tui eval` acceptance tests: the real command in a subprocess, real
rollout servers (`osmosis-tui serve --demo` subprocesses, or uvicorn on a thread), and readers
for the results folder. Waits are bounded polls, never timing assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# The conformance venv (Python 3.12, official osmosis-ai) for the official-server workspace test.
from tests.conformance.conftest import official_python  # noqa: F401

HERE = Path(__file__).resolve().parent
WORKSPACE = HERE / "workspace"
SECRET_ENV = ("ROLLOUT_LLM_API_KEY", "OSMOSIS_ROLLOUT_SERVER_API_KEY")
RUN_TIMEOUT_SEC = 120.0
FULL_DEMO_TIMEOUT_SEC = 400.0
FULL_DEMO_TEST = "test_full_demo_headless"


def osmosis(*args: str, python: str | Path = sys.executable) -> list[str]:
    """The `osmosis-tui` command line, run by `python` (`python -m tui`)."""
    return [str(python), "-m", "tui", *args]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment without the eval's secrets, plus `extra`."""
    env = {key: value for key, value in os.environ.items() if key not in SECRET_ENV}
    env.update(extra)
    return env


def run_eval(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    python: str | Path = sys.executable,
    timeout: float = RUN_TIMEOUT_SEC,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        osmosis("eval", *args, python=python),
        cwd=cwd,
        env=env or child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class RunningEval:
    """An eval subprocess; its stdout and stderr go to files, readable while it runs (a pipe
    nobody reads until the end could fill up and block it)."""

    process: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def send_signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def finish(self, timeout: float = RUN_TIMEOUT_SEC) -> tuple[str, str]:
        """Wait for the exit (killing it past `timeout`); its stdout and stderr."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"eval did not end within {timeout} s\nstderr:\n{self.stderr()}")
        return self.stdout_path.read_text(), self.stderr()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode


def start_eval(*args: str, cwd: Path, env: dict[str, str] | None = None) -> RunningEval:
    handle, name = tempfile.mkstemp(dir=cwd, prefix="eval-", suffix=".out")
    os.close(handle)
    stdout, stderr = Path(name), Path(name).with_suffix(".err")
    with stdout.open("w") as out, stderr.open("w") as err:
        process = subprocess.Popen(
            osmosis("eval", *args), cwd=cwd, env=env or child_env(), stdout=out, stderr=err
        )
    return RunningEval(process, stdout, stderr)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a JSONL file (a line still being written is left out)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]


def run_folder(cwd: Path, name: str) -> Path:
    return cwd / ".osmosis" / "evals" / name


def multiply_rows(count: int, **columns: Any) -> list[dict[str, Any]]:
    """Rows the demo workflow answers correctly; `columns` are added to every row."""
    return [
        {"user_prompt": f"What is {a} * 7?", "ground_truth": str(a * 7), **columns}
        for a in range(2, 2 + count)
    ]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel, which counts a zombie as alive
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


# -- rollout servers ------------------------------------------------------------------------


@dataclass
class ServedDemo:
    """`osmosis-tui serve --demo` in a subprocess: the demo rollout server and a chat stub."""

    process: subprocess.Popen[str]
    url: str
    chat_url: str

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        assert self.process.stdout is not None
        self.process.stdout.close()


def start_served_demo(*extra: str) -> ServedDemo:
    process = subprocess.Popen(
        osmosis("serve", "--demo", "--port", "0", "--max-concurrent", "8", *extra),
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:  # keeps the pipe drained for the server's whole life
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    urls: dict[str, str] = {}
    try:
        while len(urls) < 2:
            line = lines.get(timeout=60)
            label, _, rest = line.partition(": ")
            if label in ("rollout server", "stub chat endpoint"):
                urls[label] = rest.split()[0]
    except queue.Empty:
        process.kill()
        process.wait()
        pytest.fail(f"osmosis-tui serve --demo did not print its URLs: {urls}")
    return ServedDemo(process, urls["rollout server"], urls["stub chat endpoint"])


@contextlib.contextmanager
def served_demo(*extra: str) -> Iterator[ServedDemo]:
    server = start_served_demo(*extra)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def demo_server() -> Iterator[ServedDemo]:
    """One `serve --demo` shared by the tests that do not stop or kill their server."""
    with served_demo() as server:
        yield server


@contextlib.contextmanager
def threaded_server(serving: Callable[[], AbstractAsyncContextManager[str]]) -> Iterator[str]:
    """`async with serving() as url` (e.g. `serve_in_loop(app)`) on an event loop of its own,
    in a thread, for the duration of the block; yields the URL."""
    ready: queue.Queue[tuple[str, Callable[[], None]] | BaseException] = queue.Queue()

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        async with serving() as url:
            ready.put((url, lambda: loop.call_soon_threadsafe(stop.set)))
            await stop.wait()

    def main() -> None:
        try:
            asyncio.run(serve())
        except BaseException as exc:
            ready.put(exc)

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    started = ready.get(timeout=30)
    if isinstance(started, BaseException):
        raise started
    url, stop = started
    try:
        yield url
    finally:
        stop()
        thread.join(timeout=30)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of the workspace fixture (configs/, data/, rollouts/) in a fresh folder."""
    target = tmp_path / "workspace"
    shutil.copytree(WORKSPACE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


# -- the full demo runs in the background while the other tests run --------------------------
#
# The demo's three stuck rows sleep two minutes. Started as soon as collection is done, the
# full run waits out those minutes alongside the rest of the suite, and its test (run last)
# only collects the result.

_FULL_DEMO = pytest.StashKey[tuple[RunningEval, Path]]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.name == FULL_DEMO_TEST)


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.name == FULL_DEMO_TEST for item in session.items):
        cwd = Path(tempfile.mkdtemp(prefix="osmosis-full-demo-"))
        running = start_eval("--headless", "--json", "--name", "full-demo", cwd=cwd)
        session.config.stash[_FULL_DEMO] = (running, cwd)


def pytest_sessionfinish(session: pytest.Session) -> None:
    started = session.config.stash.get(_FULL_DEMO, None)
    if started is not None:
        running, cwd = started
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait()
        shutil.rmtree(cwd, ignore_errors=True)


@pytest.fixture
def full_demo_run(request: pytest.FixtureRequest) -> tuple[RunningEval, Path]:
    """The background `osmosis-tui eval --headless --json` of the whole demo, and its cwd."""
    return request.config.stash[_FULL_DEMO]
