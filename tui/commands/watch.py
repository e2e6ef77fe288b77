"""`osmosis-tui watch`: its flags, and the dashboard of every rollout on the servers that send
their ownership events to it (`tui.sources.watch`), whoever submitted them."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

from tui.commands import exit_codes
from tui.commands.argument_types import http_url, port, seconds
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
    watch.add_argument(
        "--events-port",
        type=port,
        default=DEFAULT_EVENTS_PORT,
        help="the port on 127.0.0.1 the servers send their OTLP/HTTP logs to (0: a free one)",
    )
    watch.add_argument(
        "--server",
        action="append",
        default=[],
        type=http_url,
        metavar="URL",
        help="a rollout server to read /health from and cancel on (repeat for several)",
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
    from core.eval.events.receiver import EventReceiverError
    from core.eval.watch import WatchError, WatchPlan
    from tui.app import create_app
    from tui.commands.dashboard import run_and_close
    from tui.sources.watch import WatchSource

    if args.previews is not None and not args.previews.is_dir():
        raise UsageError(f"--previews {args.previews}: no such folder")
    plan = WatchPlan(
        events_port=args.events_port,
        servers=tuple(args.server),
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
            raise UsageError(f"--events-port: {exc}") from None
        print(
            f"start rollout servers with OSMOSIS_ROLLOUT_OTLP_ENDPOINT={session.receiver.endpoint}"
        )
        await run_and_close(app)

    try:
        asyncio.run(watch())
    finally:
        session.close_recording()
    if plan.output is not None:
        print(f"recorded in {plan.output}; play it with: osmosis-tui replay {plan.output}")
    return exit_codes.OK


__all__ = ["DEFAULT_EVENTS_PORT", "add_watch", "run_watch"]
