"""`osmosis-tui serve`: its flags, and serving server_stub with them."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from tui.commands import exit_codes
from tui.commands.argument_types import non_negative_int, port, positive_int, seconds
from tui.commands.environment import SERVER_API_KEY_ENV
from tui.commands.usage import UsageError


def add_serve(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        usage="%(prog)s (--demo | --workflow MODULE:ATTR [--grader MODULE:ATTR]) [OPTIONS]",
        help="run the embedded rollout server",
        description="Run server_stub, the embedded Osmosis rollout server, with uvicorn.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind")
    serve.add_argument(
        "--port",
        type=port,
        default=None,
        help="port; 0 picks a free one (default: $_OSMOSIS_ROLLOUT_PORT, else 8000)",
    )
    serve.add_argument(
        "--api-key",
        default=None,
        help=f"require this bearer on every request (default: ${SERVER_API_KEY_ENV})",
    )
    serve.add_argument(
        "--max-concurrent", type=positive_int, default=4, help="rollouts executing at once"
    )
    serve.add_argument(
        "--max-pending",
        type=non_negative_int,
        default=None,
        help="rollouts that may wait for a slot before admission answers 429 (default: no limit)",
    )
    serve.add_argument("--workflow", metavar="MODULE:ATTR", help="your AgentWorkflow class")
    serve.add_argument("--grader", metavar="MODULE:ATTR", help="your Grader class")
    serve.add_argument(
        "--demo", action="store_true", help="demo workflow and grader, plus the stub chat endpoint"
    )
    serve.add_argument("--result-wait", type=seconds, default=30.0, help="long-poll hold, s")
    serve.add_argument("--lease", type=seconds, default=120.0, help="polling lease, s")
    serve.add_argument("--retention", type=seconds, default=900.0, help="result retention, s")
    serve.set_defaults(handler=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    from core.serving.loopback import run
    from server_stub.local_backend import resolve_object
    from server_stub.standalone import ServeOptions, serve

    if args.demo and (args.workflow or args.grader):
        raise UsageError("--demo serves the demo rollout; leave out --workflow and --grader")
    if not args.demo and not args.workflow:
        raise UsageError("give --workflow MODULE:ATTR (and usually --grader), or --demo")
    if args.lease <= args.result_wait:
        raise UsageError(f"--lease ({args.lease}) must exceed --result-wait ({args.result_wait})")
    if args.result_wait <= 0:
        raise UsageError("--result-wait must be greater than 0")
    if args.demo:
        from server_stub.demo import ExactMatchGrader, MultiplyWorkflow

        workflow: Any = MultiplyWorkflow
        grader: Any = ExactMatchGrader
    else:
        sys.path.insert(0, os.getcwd())
        workflow = _import_flag("--workflow", args.workflow, resolve_object)
        grader = _import_flag("--grader", args.grader, resolve_object) if args.grader else None
    api_key = args.api_key if args.api_key is not None else os.environ.get(SERVER_API_KEY_ENV)
    if api_key is not None and not api_key.strip():
        raise UsageError("--api-key must not be empty")
    listen_port = args.port
    if listen_port is None:
        listen_port = port(os.environ.get("_OSMOSIS_ROLLOUT_PORT", "8000"))
    options = ServeOptions(
        host=args.host,
        port=listen_port,
        api_key=api_key,
        workflow=workflow,
        grader=grader,
        max_concurrent=args.max_concurrent,
        max_pending=args.max_pending,
        result_wait_timeout_sec=args.result_wait,
        polling_lease_timeout_sec=args.lease,
        result_retention_sec=args.retention,
        demo=args.demo,
    )
    try:
        run(serve(options))
    except OSError as exc:
        print(
            f"osmosis-tui serve: cannot listen on {args.host}:{listen_port}: {exc.strerror}",
            file=sys.stderr,
        )
        return exit_codes.NOT_DONE
    return exit_codes.OK


def _import_flag(flag: str, spec: str, resolve: Callable[[str], Any]) -> Any:
    try:
        return resolve(spec)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"{flag} {spec!r}: {exc}") from None
