"""The `osmosis-tui` command. Heavy imports happen inside the subcommands so `--help` is quick."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

SERVER_API_KEY_ENV = "OSMOSIS_ROLLOUT_SERVER_API_KEY"


class UsageError(Exception):
    """Bad input; the message names the flag, file, line or field. Exit status 2."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected finite, non-negative seconds, got {text!r}")
    return value


def _port(text: str) -> int:
    value = _non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"ports go up to 65535, got {value}")
    return value


def _add_serve(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the embedded rollout server",
        description="Run server_stub, the embedded Osmosis rollout server, with uvicorn.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    serve.add_argument(
        "--port",
        type=_port,
        default=None,
        help="port (default $_OSMOSIS_ROLLOUT_PORT, else 8000; 0 picks a free one)",
    )
    serve.add_argument(
        "--api-key",
        default=None,
        help=f"require this bearer on every request (default ${SERVER_API_KEY_ENV})",
    )
    serve.add_argument("--max-concurrent", type=_positive_int, default=4, help="default 4")
    serve.add_argument(
        "--max-pending",
        type=_non_negative_int,
        default=None,
        help="rollouts that may wait for a slot before admission answers 429 (default: no limit)",
    )
    serve.add_argument("--workflow", metavar="MODULE:ATTR", help="your AgentWorkflow class")
    serve.add_argument("--grader", metavar="MODULE:ATTR", help="your Grader class")
    serve.add_argument(
        "--demo", action="store_true", help="demo workflow and grader, plus the stub chat endpoint"
    )
    serve.add_argument("--result-wait", type=_seconds, default=30.0, help="long-poll hold (30)")
    serve.add_argument("--lease", type=_seconds, default=120.0, help="polling lease (120)")
    serve.add_argument("--retention", type=_seconds, default=900.0, help="result retention (900)")
    serve.set_defaults(handler=_run_serve)


def _run_serve(args: argparse.Namespace) -> int:
    from server_stub.backend import resolve_object
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
    port = args.port
    if port is None:
        port = _port(os.environ.get("_OSMOSIS_ROLLOUT_PORT", "8000"))
    options = ServeOptions(
        host=args.host,
        port=port,
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
        asyncio.run(serve(options))
    except OSError as exc:
        print(
            f"osmosis-tui serve: cannot listen on {args.host}:{port}: {exc.strerror}",
            file=sys.stderr,
        )
        return 1
    return 0


def _import_flag(flag: str, spec: str, resolve: Callable[[str], Any]) -> Any:
    try:
        return resolve(spec)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"{flag} {spec!r}: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="osmosis-tui",
        description="Watch and steer Osmosis rollouts: eval runs with a live dashboard, "
        "and an embedded rollout server.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_serve(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> NoReturn:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = args.handler(args)
    except UsageError as exc:
        print(f"osmosis-tui {args.command}: {exc}", file=sys.stderr)
        status = 2
    except KeyboardInterrupt:
        status = 130
    sys.exit(status)
