"""The zero-setup demo: its rollout server (a process of its own), the stub chat endpoint
(in this process), its dataset.

Both servers are server_stub apps on free loopback ports. The rollout server runs as
`python -m server_stub.demo_server`, so that the eval and the server it drives do not share
one core (bench/README.md has the figures); the eval binds its socket, hands it over, and
passes the feeds' endpoint and folder on the command line, as it would tell a launched server,
and its bearer on its standard input, where no other process can read it. This is the one
module of `core.eval` that imports `server_stub` (DESIGN.md §1, the Embedded part); everything
else in the eval engine reaches rollout servers over HTTP only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import server_stub
from core.eval.results.durable import write_bytes_atomic
from core.eval.servers.launcher import LaunchError
from server_stub.llm_behaviour import BEHAVIOUR_HEADER

# The demo's own modules (its workflow, dataset, chat app: Starlette and AnyIO) are imported
# by the functions that run the demo: every run imports this module (the session starts the
# demo from here), and a run on a workspace or on servers of its own would pay ~50 ms at every
# start for nothing.

logger = logging.getLogger(__name__)

# Slots for the demo: the few long-running rows hold three, the rest keep flowing, and the
# table has time to show rollouts moving through their phases.
DEMO_MAX_CONCURRENT = 8
CHAT_SHUTDOWN_GRACE_SEC = 1.0
# The demo rollout as a run's manifest names it: its code is server_stub's own.
DEMO_ROLLOUT_ENTRYPOINT = "demo.py"
# Starting it imports FastAPI and the demo; stopping it flushes its ownership events (3 s at
# most) after cancelling what still runs.
SERVER_START_TIMEOUT_SEC = 60.0
SERVER_STOP_TIMEOUT_SEC = 10.0
LISTEN_BACKLOG = 2048
# The longest line of the demo server's output read back (a log record, traceback included):
# a longer one is left out with a warning, and the lines after it are read as before.
RECORD_LIMIT = 1 << 20


@asynccontextmanager
async def stub_chat_endpoint() -> AsyncIterator[str]:
    """The stub OpenAI-compatible endpoint; yields the base URL rollouts append paths to."""
    from core.serving.loopback import serve_in_loop
    from server_stub.demo import demo_chat_settings
    from server_stub.llm import create_chat_app

    # Chat calls still open at the end belong to rollouts the run left behind (an interrupt
    # that leaves them running, a server ignoring a cancel): not worth waiting for.
    async with serve_in_loop(
        create_chat_app(demo_chat_settings()), timeout_graceful_shutdown=CHAT_SHUTDOWN_GRACE_SEC
    ) as url:
        yield f"{url}/v1"


@asynccontextmanager
async def demo_rollout_server(
    *,
    max_concurrent: int = DEMO_MAX_CONCURRENT,
    artifact_root: Path | None = None,
    otlp_endpoint: str = "",
    preview_root: str = "",
    api_key: str | None = None,
) -> AsyncIterator[str]:
    """server_stub with the demo workflow and grader, in a process of its own; yields its URL.

    `otlp_endpoint` and `preview_root` turn its feeds on (PROTOCOL.md §8), as the variables
    do for a launched server; empty, they stay off whatever the environment says. With
    `api_key`, every request needs it as its bearer (the eval gives one of its own, so that
    no other local process can cancel the run's rollouts): it goes to the process on its
    standard input, never on its command line or in its environment, which other processes
    can read. When the block ends the process cancels what it still runs and stops."""
    from core.serving.loopback import bind_socket

    sock = bind_socket()
    sock.listen(LISTEN_BACKLOG)  # connections queue from now on, before the child serves
    argv = [
        sys.executable,
        "-m",
        "server_stub.demo_server",
        *("--fd", str(sock.fileno())),
        *("--max-concurrent", str(max_concurrent)),
        *("--otlp-endpoint", otlp_endpoint),
        *("--preview-root", preview_root),
        *(("--artifact-root", str(artifact_root)) if artifact_root is not None else ()),
    ]
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=(sock.fileno(),),
            limit=RECORD_LIMIT,
            # A session of its own, as a launched server: the terminal's Ctrl-C and hang-up
            # are the eval's to handle (it may still cancel rollouts there), and the eval
            # stops this process itself.
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()  # the child has its own copy
    errors = asyncio.ensure_future(_log_lines(process.stderr))
    try:
        assert process.stdin is not None
        # Its first line of input: the bearer, or an empty line for none.
        process.stdin.write(f"{api_key or ''}\n".encode())
        await _ready(process)
        yield url
    finally:
        await _stop(process)
        await asyncio.wait({errors}, timeout=1.0)
        errors.cancel()


async def _ready(process: asyncio.subprocess.Process) -> None:
    from server_stub.demo_server import READY

    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), SERVER_START_TIMEOUT_SEC)
    except asyncio.TimeoutError:
        line = b""
    if line.decode(errors="replace").strip() != READY:
        returncode = process.returncode
        raise LaunchError(
            "the demo rollout server did not start"
            + (f" (exit {returncode})" if returncode is not None else "")
            + "; its errors are in the run's log"
        )


async def _log_lines(stream: asyncio.StreamReader | None) -> None:
    """The child's log records (`server_stub.demo_server.read_record`), each logged again
    under its own name and level, as if the server still ran here; any other line (a crash
    before its logging was set up) as a warning of this module's."""
    from server_stub.demo_server import read_record

    assert stream is not None
    while True:
        try:
            raw = await stream.readline()
        except ValueError:  # past RECORD_LIMIT: dropped by the reader, which reads on
            logger.warning("demo rollout server: a log line past %d bytes left out", RECORD_LIMIT)
            continue
        if not raw:
            return
        record = read_record(raw)
        if record is not None:
            logging.getLogger(record.name).log(record.level, "%s", record.text)
        elif line := raw.decode(errors="replace").rstrip():
            logger.warning("demo rollout server: %s", line)


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), SERVER_STOP_TIMEOUT_SEC)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    if process.stdin is not None:
        process.stdin.close()


def refresh_demo_dataset(target: Path) -> None:
    """Write the demo dataset at `target`, unless it already holds exactly these rows.

    Always this version's rows: an older osmosis-tui may have left other rows there. An
    `OSError` means the file could not be written.
    """
    from server_stub.demo import demo_dataset

    rows = demo_dataset()
    if target.is_file() and target.read_bytes() == rows:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(target, rows)  # a run starting meanwhile reads the old rows or the new


def demo_rollout_source() -> Path:
    """The folder whose files are the demo rollout's code (for its manifest's source digest)."""
    return Path(server_stub.__file__).resolve().parent


__all__ = [
    # The demo rows' per-request behaviour, which the gateway passes on to the stub model.
    "BEHAVIOUR_HEADER",
    "DEMO_ROLLOUT_ENTRYPOINT",
    "demo_rollout_server",
    "demo_rollout_source",
    "refresh_demo_dataset",
    "stub_chat_endpoint",
]
