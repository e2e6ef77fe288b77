"""Real rollout servers for the acceptance tests: `osmosis-tui serve --demo` in a subprocess,
or any ASGI app under uvicorn on a thread of its own."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import pytest

from tests.eval.runs.command import child_env, osmosis


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


def start_served_demo(*extra: str, **env: str) -> ServedDemo:
    """The server, with the flags `extra` and the variables `env` besides the tests' own."""
    process = subprocess.Popen(
        osmosis("serve", "--demo", "--port", "0", "--max-concurrent", "8", *extra),
        env=child_env(**env),
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
def served_demo(*extra: str, **env: str) -> Iterator[ServedDemo]:
    server = start_served_demo(*extra, **env)
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def threaded_server(serving: Callable[[], AbstractAsyncContextManager[str]]) -> Iterator[str]:
    """`async with serving() as url` (e.g. `serve_in_loop(app)`) on an event loop of its own,
    in a thread, for the duration of the block; yields the URL."""
    ready: queue.Queue[tuple[str, Callable[[], None]] | BaseException] = queue.Queue()

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        async with serving() as url:

            def stop_serving() -> None:  # called from the test's thread
                loop.call_soon_threadsafe(stop.set)

            ready.put((url, stop_serving))
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
