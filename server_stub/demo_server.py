"""The zero-setup demo's rollout server as a process of its own (`core.eval.servers.embedded` starts
it), so that the eval and the server it drives do not share one core.

    python -m server_stub.demo_server --fd N [--otlp-endpoint URL] [--preview-root DIR]
        [--artifact-root DIR] [--max-concurrent N]

It serves the demo workflow and grader on the listening socket it inherits as file descriptor
`N` (bound by the eval, so the port is known before this process starts), with its feeds
(PROTOCOL.md §8) pointed where the flags say: empty or absent, a feed stays off whatever the
environment says, exactly as for the in-process server it replaces. The first line of its
standard input is the bearer every request must carry (an empty line: none), so that the key
is never on a command line or in an environment, which other local processes can read.

It prints `READY` once it serves, and writes its log records to standard error one JSON
object a line (`read_record` reads them back), every record through `LOG_SAFETY` (keys masked,
control characters escaped), so that the eval logs them again as they were, and no text of
one record can pass for a record of its own. It stops on SIGTERM or SIGINT, cancelling at once
whatever still runs (the run is over: nothing waits for those rollouts, unlike a shared
server's clients), and when its standard input closes: the eval that started it is gone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from core.serving.loopback import HostedServer, run, uvicorn_config
from server_stub.log_safety import LOG_SAFETY

READY = "READY"


class RelayedRecord(NamedTuple):
    """One log record of this process as the eval reads it back."""

    level: int
    name: str
    text: str
    """The message, then its traceback when it has one."""


def read_record(line: bytes) -> RelayedRecord | None:
    """The record a line of this process's standard error holds; None for any other line (a
    crash before logging was set up)."""
    try:
        fields = json.loads(line)
    except ValueError:
        return None
    if not isinstance(fields, dict):
        return None
    level, name, text = fields.get("level"), fields.get("name"), fields.get("text")
    if not (isinstance(level, int) and isinstance(name, str) and isinstance(text, str)):
        return None
    return RelayedRecord(level, name, text)


class _RecordLines(logging.Formatter):
    """A record as one line of JSON: its level, its logger's name and its text."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return json.dumps({"level": record.levelno, "name": record.name, "text": text})


async def serve(args: argparse.Namespace, api_key: str | None) -> None:
    # Imported here: the eval imports this module for `READY` and `read_record`, and never
    # needs FastAPI and the demo's stack in its own process.
    from server_stub.app import create_rollout_server
    from server_stub.demo import ExactMatchGrader, MultiplyWorkflow, aclose_chat_client
    from server_stub.local_backend import LocalBackend
    from server_stub.workflow import AgentWorkflowConfig, ConcurrencyConfig

    backend = LocalBackend(
        workflow=MultiplyWorkflow,
        grader=ExactMatchGrader,
        workflow_config=AgentWorkflowConfig(
            name="demo", concurrency=ConcurrencyConfig(max_concurrent=args.max_concurrent)
        ),
        artifact_root=args.artifact_root,
    )
    app = create_rollout_server(
        backend=backend,
        configure_logging=False,
        otlp_endpoint=args.otlp_endpoint,
        preview_root=args.preview_root,
        api_key=api_key,
    )
    registry = app.state.rollout_server.registry
    server = HostedServer(uvicorn_config(app))
    loop = asyncio.get_running_loop()

    def stop() -> None:
        # The run is over and this server ends with it: what it still runs (a rollout
        # untracked or left behind) is cancelled now, not after a shared server's 10 s drain.
        registry.cancel(registry.select(None, None, True))
        server.should_exit = True

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop)
    # The eval holds our standard input: end of file means it is gone, however it ended.
    watch, _ = await loop.connect_read_pipe(lambda: _EndOfInput(stop), sys.stdin)
    sock = socket.socket(fileno=args.fd)
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if serving.done():
                return  # uvicorn said why on stderr; without READY the eval reports it
            await asyncio.sleep(0.005)
        print(READY, flush=True)
        await serving
    finally:
        watch.close()
        await aclose_chat_client()


class _EndOfInput(asyncio.Protocol):
    """Calls `stop` when the pipe it reads closes; what arrives on it is ignored."""

    def __init__(self, stop: Callable[[], None]) -> None:
        self._stop = stop

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop()


def _log_to_stderr() -> None:
    """Every record of the process (server_stub's, uvicorn's, any library's) masked and
    escaped by `LOG_SAFETY`, then written as a line `read_record` reads."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(LOG_SAFETY)
    handler.setFormatter(_RecordLines())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # One line per HTTP request would drown the log and cost CPU per rollout (as the eval's).
    logging.getLogger("httpx").setLevel(logging.WARNING)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m server_stub.demo_server")
    parser.add_argument("--fd", type=int, required=True, help="the listening socket")
    parser.add_argument("--otlp-endpoint", default="", help="ownership events (off if empty)")
    parser.add_argument("--preview-root", default="", help="live previews (off if empty)")
    parser.add_argument("--artifact-root", type=Path, help="where rollouts' artifacts go")
    parser.add_argument("--max-concurrent", type=int, default=8)
    args = parser.parse_args()
    _log_to_stderr()
    # Before anything runs, so that what follows on standard input is only its end.
    api_key = sys.stdin.buffer.readline().decode().strip() or None
    run(serve(args, api_key))


if __name__ == "__main__":
    main()
