"""Helpers for the reliability tests (issue 7): fault injection on loopback, in-process evals,
and the CI/full switch.

`OSMOSIS_SOAK=full` (set by `make soak`) runs the long soak and the SIGKILL loop at their full
counts; CI runs the same tests at small counts. Everything binds 127.0.0.1, every wait is
bounded, and only processes these tests started are ever signalled (by PID).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.eval import EvalRequest, EvalSession, EvalSummary, prepare
from server_stub import LocalBackend, create_rollout_server
from server_stub.demo import ExactMatchGrader, MultiplyWorkflow, aclose_chat_client
from server_stub.llm import create_chat_app
from server_stub.llm_behaviour import StubChatSettings
from server_stub.serving import serve_in_loop
from server_stub.workflow import AgentWorkflowConfig, ConcurrencyConfig

# The session-scoped `serve --demo` of the eval tests, shared rather than started again.
from tests.eval_run.conftest import demo_server  # noqa: F401
from tests.eval_run.files import write_jsonl

FULL = os.environ.get("OSMOSIS_SOAK") == "full"


def scaled(ci: int, full: int) -> int:
    """`full` under `make soak` (OSMOSIS_SOAK=full), else the CI count."""
    return full if FULL else ci


# -- servers on this event loop -----------------------------------------------------------------


def demo_app(
    *,
    max_concurrent: int = 16,
    workflow: Any = MultiplyWorkflow,
    grader: Any = ExactMatchGrader,
    **server: Any,
) -> Any:
    backend = LocalBackend(
        workflow=workflow,
        grader=grader,
        workflow_config=AgentWorkflowConfig(
            name="reliability", concurrency=ConcurrencyConfig(max_concurrent=max_concurrent)
        ),
    )
    return create_rollout_server(backend=backend, configure_logging=False, **server)


@asynccontextmanager
async def rollout_server(app: Any) -> AsyncIterator[str]:
    """`app` under uvicorn on 127.0.0.1:<free port>, on the running loop; yields its URL."""
    try:
        async with serve_in_loop(app) as url:
            yield url
    finally:
        await aclose_chat_client()


@asynccontextmanager
async def chat_endpoint(
    settings: StubChatSettings | None = None, **kwargs: Any
) -> AsyncIterator[str]:
    """The stub chat endpoint; yields the base URL a rollout appends /chat/completions to."""
    app = create_chat_app(settings or StubChatSettings(), **kwargs)
    async with serve_in_loop(app, timeout_graceful_shutdown=1.0) as url:
        yield f"{url}/v1"


@dataclass
class SessionRun:
    """An in-process eval session and what its front end was told."""

    summary: EvalSummary
    session: EvalSession
    notices: list[str] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return self.summary.folder


async def run_session(
    tmp_path: Path, rows: list[dict[str, Any]] | Path, **request: Any
) -> SessionRun:
    """`osmosis-tui eval --server ...` without the subprocess: prepare, run, summarise."""
    dataset = rows if isinstance(rows, Path) else write_jsonl(tmp_path / "rows.jsonl", rows)
    request.setdefault("output", tmp_path / "out")
    request.setdefault("name", "run")
    plan = prepare(EvalRequest(dataset_file=dataset, **request))
    notices: list[str] = []
    session = EvalSession(plan, on_notice=notices.append)
    summary = await session.run()
    return SessionRun(summary, session, notices)


# -- a TCP proxy that misbehaves on demand -------------------------------------------------------


@dataclass(eq=False)
class _Link:
    """One proxied connection: the client's side, the server's side, and whether a request
    went up with no byte of answer back yet (and since when)."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    asked_at: float | None = None

    def abort(self) -> None:
        self.client.transport.abort()
        if self.server is not None:
            self.server.transport.abort()


class Proxy:
    """A loopback TCP proxy in front of `target_port`.

    `mode` decides what a *new* connection gets: "pass" (forwarded, each chunk held back
    `delay` seconds), "drop" (accepted, then closed at once), "blackhole" (accepted and read,
    never answered). `cut()` closes live connections, as a network failure would.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.mode = "pass"
        self.delay = 0.0
        self.accepted = 0
        self.url = ""
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def close(self) -> None:
        """Stop listening (new connections are refused) and cut the live ones."""
        if self._server is not None:
            self._server.close()
        self.cut()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)

    def cut(self, *, waiting_longer_than: float | None = None) -> int:
        """Abort live connections; with `waiting_longer_than`, only those whose request has
        waited that long for its answer (long-polls, not a quick admission or an idle
        kept-alive connection). Returns how many were cut."""
        now = asyncio.get_running_loop().time()
        cut = 0
        for link in list(self._links):
            if waiting_longer_than is not None and (
                link.asked_at is None or now - link.asked_at < waiting_longer_than
            ):
                continue
            link.abort()
            self._links.discard(link)
            cut += 1
        return cut

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        link = _Link(writer)
        self._links.add(link)
        try:
            if self.mode == "drop":
                writer.transport.abort()
                return
            if self.mode == "blackhole":
                while await reader.read(65536):
                    pass
                return
            up_reader, link.server = await asyncio.open_connection("127.0.0.1", self.target_port)
            await asyncio.gather(
                self._pump(reader, link.server, link, asking=True),
                self._pump(up_reader, writer, link, asking=False),
                return_exceptions=True,
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.abort()
            self._links.discard(link)
            self._tasks.discard(task)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: _Link,
        *,
        asking: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            while chunk := await reader.read(65536):
                if asking:
                    link.asked_at = link.asked_at or loop.time()
                else:
                    link.asked_at = None
                if self.delay:
                    await asyncio.sleep(self.delay)
                writer.write(chunk)
                await writer.drain()
        finally:
            link.abort()


@asynccontextmanager
async def proxy_to(url: str) -> AsyncIterator[Proxy]:
    proxy = await Proxy(int(url.rsplit(":", 1)[1])).start()
    try:
        yield proxy
    finally:
        await proxy.close()


# -- filesystems that fail ------------------------------------------------------------------------


def _mount(*args: str) -> bool:
    try:
        done = subprocess.run(["mount", *args], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30, check=False)


@contextlib.contextmanager
def small_filesystem(size: str = "256k") -> Iterator[Path | None]:
    """A fresh tmpfs of `size` (root only); None where mounting is not allowed."""
    mountpoint = Path(tempfile.mkdtemp(prefix="osmosis-tmpfs-"))
    mounted = os.geteuid() == 0 and _mount(
        "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)
    )
    try:
        yield mountpoint if mounted else None
    finally:
        if mounted:
            _umount(mountpoint)
        with contextlib.suppress(OSError):
            mountpoint.rmdir()


def remount(path: Path, *, read_only: bool) -> bool:
    """Make a tmpfs from `small_filesystem` read-only or writable again."""
    return _mount("-o", f"remount,{'ro' if read_only else 'rw'}", str(path))


def fill(folder: Path) -> Path:
    """Write one file until the filesystem under `folder` is full; returns it."""
    filler = folder / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    return filler
