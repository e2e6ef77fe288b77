"""`osmosis-tui watch`: its flags, and the dashboard of every rollout on the servers that send
their ownership events to it (`tui.sources.watch`), whoever submitted them."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
from pathlib import Path
from typing import Any

from tui.commands import exit_codes
from tui.commands.argument_types import host_port, http_url, port, seconds
from tui.commands.environment import SERVER_API_KEY_ENV
from tui.commands.usage import UsageError

#: The OTLP/HTTP port (`core.eval.watch.OTLP_HTTP_PORT`), said here so that `--help` loads
#: nothing of the engine.
DEFAULT_EVENTS_PORT = 4318


def add_watch(commands: Any) -> None:
    watch = commands.add_parser(
        "watch",
        help="watch every rollout of the rollout servers that send their events here",
        description="A live dashboard of every rollout on the rollout servers started with "
        "OSMOSIS_ROLLOUT_OTLP_ENDPOINT pointing here, whoever submitted them (a trainer, a "
        "custom harness, the official eval). Phases and their times are the servers' own; "
        "results and rewards are not on the events, and stay with whoever sent the rollout. "
        "With --server, each server's /health shows and c/C cancel a rollout on its server.",
    )
    listen = watch.add_mutually_exclusive_group()
    listen.add_argument(
        "--events-port",
        type=port,
        default=DEFAULT_EVENTS_PORT,
        help="the port on 127.0.0.1 the servers send their OTLP/HTTP logs to (0: a free one)",
    )
    listen.add_argument(
        "--events-listen",
        type=host_port,
        metavar="HOST:PORT",
        help="listen there instead, to receive from servers on other machines (0.0.0.0:4318, "
        "[::]:4318); beyond loopback only with --events-token-file or --events-token",
    )
    token = watch.add_mutually_exclusive_group()
    token.add_argument(
        "--events-token-file",
        type=Path,
        metavar="FILE",
        help="the bearer every request to the event listener must carry, read from FILE",
    )
    token.add_argument(
        "--events-token",
        metavar="TOKEN",
        help="the same bearer on the command line (where other local users can read it: "
        "prefer the file)",
    )
    watch.add_argument(
        "--server",
        action="append",
        default=[],
        type=http_url,
        metavar="URL",
        help="a rollout server to read /health from and cancel on (repeat for several); a "
        "host name of several addresses is that many servers, looked up again as it runs",
    )
    watch.add_argument(
        "--servers-file",
        type=Path,
        metavar="FILE",
        help="rollout server URLs, one a line, read again when the file changes",
    )
    watch.add_argument(
        "--server-api-key",
        default=None,
        help=f"bearer for the rollout servers (default: ${SERVER_API_KEY_ENV})",
    )
    watch.add_argument(
        "--stuck-after",
        type=seconds,
        help="flag rollouts stuck in a phase this long, s "
        "(default: 3x the phase's median duration, at least 30 s)",
    )
    watch.add_argument(
        "--previews",
        type=Path,
        metavar="DIR",
        help="the servers' preview root (their _OSMOSIS_ROLLOUT_PREVIEW_ROOT): transcripts (t)",
    )
    watch.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="DIR",
        help="record the watch in DIR/transitions.jsonl, for osmosis-tui replay DIR",
    )
    watch.set_defaults(handler=run_watch)


def run_watch(args: argparse.Namespace) -> int:
    from core.eval.errors import InputError
    from core.eval.events.receiver import EventReceiverError
    from core.eval.plan.server_url import base_url
    from core.eval.servers.directory import read_servers_file
    from core.eval.watch import WatchError, WatchPlan
    from tui.app import create_app
    from tui.commands.dashboard import run_and_close
    from tui.sources.watch import WatchSource

    if args.previews is not None and not args.previews.is_dir():
        raise UsageError(f"--previews {args.previews}: no such folder")
    if args.servers_file is not None:
        try:
            read_servers_file(args.servers_file)
        except InputError as exc:
            raise UsageError(str(exc)) from None
    host, events_port = args.events_listen or ("127.0.0.1", args.events_port)
    token = _events_token(args)
    if token is None and not _loopback(host):
        raise UsageError(
            f"--events-listen {host}: beyond loopback every request must carry a bearer; "
            "give --events-token-file FILE (or --events-token TOKEN)"
        )
    plan = WatchPlan(
        events_port=events_port,
        events_host=host,
        events_token=token,
        servers=tuple(base_url(url) for url in args.server),
        servers_file=args.servers_file,
        server_api_key=args.server_api_key or os.environ.get(SERVER_API_KEY_ENV) or None,
        stuck_after_sec=args.stuck_after,
        output=args.output,
        previews=args.previews,
    )

    def notice(message: str) -> None:
        app.call_later(app.report, message, severity="warning")

    source = WatchSource(plan, on_notice=notice)
    session = source.session
    try:
        session.open_recording()
    except WatchError as exc:
        raise UsageError(f"-o {exc}") from None
    app = create_app(source, export_dir=plan.output)

    async def watch() -> None:
        try:
            await session.receiver.start()
        except EventReceiverError as exc:
            flag = "--events-listen" if args.events_listen else "--events-port"
            raise UsageError(f"{flag}: {exc}") from None
        print(f"start rollout servers with {_setting(session.receiver.endpoint, token)}")
        await run_and_close(app)

    try:
        asyncio.run(watch())
    finally:
        session.close_recording()
    if plan.output is not None:
        print(f"recorded in {plan.output}; play it with: osmosis-tui replay {plan.output}")
    return exit_codes.OK


def _loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or `localhost`): only this machine reaches it."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name that may resolve anywhere


def _events_token(args: argparse.Namespace) -> str | None:
    """The bearer the flags give, from the file or the command line; None without one."""
    flag = "--events-token"
    token: str | None = args.events_token
    if args.events_token_file is not None:
        flag = f"--events-token-file {args.events_token_file}"
        try:
            token = args.events_token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{flag}: cannot read it ({exc})") from None
    if token is None:
        return None
    # What can travel in an HTTP header as it is, and in OTEL_EXPORTER_OTLP_HEADERS.
    if not token or not token.isascii() or not token.isprintable() or " " in token:
        raise UsageError(f"{flag}: the token must be printable ASCII without spaces")
    return token


def _setting(endpoint: str, token: str | None) -> str:
    """What a server is started with to send here; the token is the user's to fill in, never
    printed."""
    said = f"OSMOSIS_ROLLOUT_OTLP_ENDPOINT={endpoint}"
    if endpoint.startswith(("http://0.0.0.0:", "http://[::]:")):
        said += " (with this machine's address for the wildcard)"
    if token is not None:
        said += " OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<the token>"
    return said


__all__ = ["DEFAULT_EVENTS_PORT", "add_watch", "run_watch"]
