"""The `osmosis-tui` command. Heavy imports happen inside the subcommands so `--help` is quick."""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from core.eval import EvalPlan
    from core.eval.errors import InputProblem

SERVER_API_KEY_ENV = "OSMOSIS_ROLLOUT_SERVER_API_KEY"
LLM_API_KEY_ENV = "ROLLOUT_LLM_API_KEY"
PROGRAM = "osmosis-tui"
#: The output modes, accepted anywhere on the command line (as the official CLI accepts them).
OUTPUT_FLAGS = ("--json", "--plain")
#: What the official `osmosis eval run` does with the Osmosis Platform, which we never reach.
UPLOAD_COMPATIBLE = (
    "the results folder is upload-compatible: once the run is complete, upload it with "
    "`osmosis eval upload <folder>` (the official CLI)"
)


class UsageError(Exception):
    """Bad input; the message names the flag, file, line or field. Exit status 2."""


def _whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


_positive_int = _whole_number(1)
_non_negative_int = _whole_number(0)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected finite, non-negative seconds, got {text!r}")
    return value


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _port(text: str) -> int:
    value = _non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"ports go up to 65535, got {value}")
    return value


def _fixed_port(text: str) -> int:
    """A fixed port to listen on: 1 to 65535 (0, "any free port", is what leaving it out means)."""
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"ports go up to 65535, got {value}")
    return value


def _http_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// URL, got {text!r}")
    return text


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
    from server_stub.local_backend import resolve_object
    from server_stub.serving import run
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
        run(serve(options))
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


def _add_eval(commands: Any) -> None:
    run = commands.add_parser(
        "eval",
        help="run a dataset through rollout servers (the zero-setup demo without arguments)",
        description="Run every row of a dataset through rollout servers and leave a resumable "
        "results folder in the official layout. Without arguments: the bundled demo on an "
        "embedded server. With an Osmosis workspace's configs/eval/X.toml: that workspace's "
        "rollout server, from wherever inside the workspace the command runs.",
    )
    run.add_argument("config", nargs="?", type=Path, help="Osmosis eval config (TOML)")
    official = run.add_argument_group("as `osmosis eval run`")
    official.add_argument("--name", help="run name; the same name resumes that run")
    official.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="results root (default: <workspace>/.osmosis/evals, or ./.osmosis/evals)",
    )
    official.add_argument(
        "--dataset-file",
        "--dataset",
        type=Path,
        help="JSONL, CSV or Parquet (default: <workspace>/data/<experiment.dataset>.*)",
    )
    official.add_argument(
        "--secrets-file",
        metavar="PATH|-",
        help="NAME=value lines for the config's [secrets] names ('-': standard input); "
        "the environment fills in the rest; values are never saved",
    )
    official.add_argument(
        "--rows", help='source rows, e.g. "3,7,10-20" (0-based; replaces evaluation.limit)'
    )
    official.add_argument(
        "--fresh", action="store_true", help="move an existing run aside, start over"
    )
    official.add_argument(
        "--retry-failed",
        action="store_true",
        help="on resume, also re-run failed and skipped items",
    )
    official.add_argument("--max-in-flight", type=_positive_int, help="rollouts in flight at once")
    official.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="do not ask before sending rollouts to a real model (asked only on a terminal)",
    )
    official.add_argument(
        "--rollout-port",
        type=_fixed_port,
        metavar="N",
        help="fixed port for the workspace rollout server (default: a free one)",
    )
    official.add_argument(
        "--listener-port",
        type=_fixed_port,
        metavar="N",
        help="fixed port for the model gateway (default: a free one)",
    )
    official.add_argument(
        "--advertise-url",
        type=_http_url,
        metavar="URL",
        help="the model gateway's base URL as the rollouts reach it (a proxy or tunnel)",
    )
    official.add_argument(
        "--verbose",
        action="store_true",
        help="stream the run's log to stderr (without the dashboard)",
    )
    for flag in OUTPUT_FLAGS:
        # Hoisted to the top-level parser before parsing (see _hoist_output_flags); listed
        # here so that `eval --help` shows them.
        official.add_argument(
            flag,
            action="store_true",
            default=argparse.SUPPRESS,
            help="the end of the run as the official JSON envelope"
            if flag == "--json"
            else "the end of the run without decoration",
        )
    official.add_argument(
        "--upload", action="store_true", help="refused: needs the Osmosis Platform"
    )
    official.add_argument(
        "--tunnel", nargs="?", const="", metavar="PROVIDER", help="refused: needs the Platform"
    )
    ours = run.add_argument_group("osmosis-tui only")
    ours.add_argument(
        "--server",
        action="append",
        default=[],
        metavar="URL",
        help="a running rollout server (repeat for several)",
    )
    ours.add_argument(
        "--server-api-key",
        default=None,
        help=f"bearer for the rollout servers (default ${SERVER_API_KEY_ENV})",
    )
    ours.add_argument(
        "--chat-url",
        help=f"the model behind the gateway: an OpenAI-compatible base URL (key from "
        f"${LLM_API_KEY_ENV}), or 'stub' (default: the stub model, or with a config its "
        "model_path through LiteLLM)",
    )
    ours.add_argument("--limit", type=_positive_int, help="the first N selected rows")
    ours.add_argument("--n", type=_positive_int, help="attempts per row")
    ours.add_argument("--agent-timeout", type=_seconds, help="workflow deadline per rollout, s")
    ours.add_argument("--grader-timeout", type=_seconds, help="grader deadline per rollout, s")
    ours.add_argument("--pass-threshold", type=_finite, help="reward needed to pass (default 1.0)")
    ours.add_argument(
        "--stuck-after", type=_seconds, help="flag rollouts stuck in a phase this long"
    )
    ours.add_argument(
        "--headless",
        action="store_true",
        help="no dashboard (automatic when stdout is no terminal, and with --verbose)",
    )
    ours.add_argument(
        "--on-interrupt",
        choices=("cancel", "leave"),
        default="cancel",
        help="headless Ctrl-C: cancel in-flight rollouts on the server (default) or leave them",
    )
    run.set_defaults(handler=_run_eval)


def _eval_flag_problems(args: argparse.Namespace) -> list[InputProblem]:
    """What is wrong with the flags themselves, reported with the other input problems."""
    from core.eval.errors import InputProblem

    problems: list[InputProblem] = []

    def problem(flag: str, message: str) -> None:
        problems.append(InputProblem(flag, None, None, message))

    if args.upload:
        problem(
            "--upload",
            f"needs the Osmosis Platform, which osmosis-tui never uses; {UPLOAD_COMPATIBLE}",
        )
    if args.tunnel is not None:
        problem(
            "--tunnel",
            "opens a Platform-managed tunnel, which osmosis-tui never uses (for a tunnel of "
            f"your own: --listener-port and --advertise-url); {UPLOAD_COMPATIBLE}",
        )
    if args.fresh and args.retry_failed:
        problem("--fresh", "starts over, and --retry-failed resumes: pick one")
    if args.config is None and not args.server and args.dataset_file is not None:
        problem("--dataset-file", "needs a config or --server (the demo has its own data)")
    return problems


def _rerun_command(args: argparse.Namespace) -> str:
    """The command that runs the same inputs again, as given (for the resume and retry hints;
    never a key: those come from the environment or a file)."""
    words = [PROGRAM, "eval"]
    if args.config is not None:
        words.append(str(args.config))
    for url in args.server:
        words += ["--server", url]
    repeated = (
        ("--output", args.output),
        ("--dataset-file", args.dataset_file),
        ("--secrets-file", args.secrets_file),
        ("--chat-url", args.chat_url),
        ("--rows", args.rows),
        ("--limit", args.limit),
        ("--n", args.n),
        ("--agent-timeout", args.agent_timeout),
        ("--grader-timeout", args.grader_timeout),
        ("--pass-threshold", args.pass_threshold),
        ("--rollout-port", args.rollout_port),
        ("--listener-port", args.listener_port),
        ("--advertise-url", args.advertise_url),
    )
    for flag, value in repeated:
        if value is not None:
            words += [flag, str(value)]
    return shlex.join(words)


def _run_eval(args: argparse.Namespace) -> int:
    from core.eval import (
        DEFAULT_OUTPUT,
        EvalRequest,
        InputError,
        RunFolderError,
        RunLocked,
        prepare,
    )
    from core.eval.gateway_errors import GatewayError
    from core.eval.reporter import OutputMode
    from core.eval.secret_values import secrets_in_environment

    server_key = args.server_api_key or os.environ.get(SERVER_API_KEY_ENV) or None
    request = EvalRequest(
        config_path=args.config,
        servers=tuple(url.rstrip("/") for url in args.server),
        server_api_key=server_key,
        dataset_file=args.dataset_file,
        chat_url=args.chat_url,
        llm_api_key=os.environ.get(LLM_API_KEY_ENV) or None,
        listener_port=args.listener_port,
        advertise_url=args.advertise_url,
        limit=args.limit,
        rows=args.rows,
        n=args.n,
        max_in_flight=args.max_in_flight,
        agent_timeout_sec=args.agent_timeout,
        grader_timeout_sec=args.grader_timeout,
        pass_threshold=args.pass_threshold,
        output=args.output or DEFAULT_OUTPUT,
        name=args.name,
        fresh=args.fresh,
        retry_failed=args.retry_failed,
        stuck_after_sec=args.stuck_after,
        secrets_file=args.secrets_file,
        rollout_port=args.rollout_port,
    )
    try:
        plan = prepare(request, flag_problems=_eval_flag_problems(args))
    except InputError as exc:
        raise UsageError("bad input:\n" + str(exc)) from None
    if not _confirmed(plan, assume_yes=args.yes):
        print("not started; nothing was written", file=sys.stderr)
        return 0
    mode: OutputMode = "json" if args.json else "plain" if args.plain else "rich"
    rerun = _rerun_command(args)
    try:
        with secrets_in_environment(plan.secrets):
            if args.headless or args.verbose or not sys.stdout.isatty():
                from tui.headless import run_headless

                return run_headless(
                    plan,
                    mode=mode,
                    on_interrupt=args.on_interrupt,
                    rerun=rerun,
                    verbose=args.verbose,
                )
            from tui.dashboard import run_dashboard

            return run_dashboard(plan, mode=mode, rerun=rerun)
    except RunLocked as exc:
        # Not bad input: another run lives. Exit 1, as the official tool exits for it.
        print(f"osmosis-tui eval: {exc}", file=sys.stderr)
        return 1
    except (RunFolderError, GatewayError) as exc:
        # A results folder that cannot be used, a model that cannot be (the preflight), or
        # a gateway port that cannot be bound: bad input, found once the run began.
        raise UsageError(str(exc)) from None


def _confirmed(plan: EvalPlan, *, assume_yes: bool) -> bool:
    """Whether to go on: asked, on a terminal, before rollouts go to a real model (one that
    may cost money: not the stub); off a terminal, or with -y, it is not asked."""
    from core.eval.plan import pending_count
    from core.eval.secret_values import STDIN

    if assume_yes or plan.upstream.kind == "stub" or not sys.stdin.isatty():
        return True
    todo = pending_count(plan)
    if todo == 0:
        return True
    if plan.request.secrets_file == STDIN:
        raise UsageError(
            "--secrets-file - read the terminal's input, so the question whether to start "
            "cannot be asked there: add -y"
        )
    rollouts = "rollout" if todo == 1 else "rollouts"
    print(
        f"Send {todo} {rollouts} to model {plan.model_name}? [y/N] ",
        end="",
        file=sys.stderr,
        flush=True,
    )
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def _add_replay(commands: Any) -> None:
    replay = commands.add_parser(
        "replay",
        help="play a recorded run back on the dashboard (read-only)",
        description="Replay RUN_DIR/transitions.jsonl on the dashboard: p pauses, . steps one "
        "event, + and - change the speed.",
    )
    replay.add_argument("transitions", type=Path, help="RUN_DIR/transitions.jsonl (or RUN_DIR)")
    replay.add_argument("--speed", type=_finite, default=1.0, help="playback speed (default 1)")
    replay.set_defaults(handler=_run_replay)


def _run_replay(args: argparse.Namespace) -> int:
    from tui.sources.replay import ReplayError, ReplaySource

    path: Path = args.transitions
    if path.is_dir():
        path = path / "transitions.jsonl"
    if args.speed <= 0:
        raise UsageError(f"--speed must be greater than 0, got {args.speed}")
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        source = ReplaySource(path, speed=args.speed)
    except ReplayError as exc:
        raise UsageError(str(exc)) from None
    from tui.app import create_app

    create_app(source, clock=source.clock, export_dir=path.parent).run()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Watch and steer Osmosis rollouts: eval runs with a live dashboard, "
        "and an embedded rollout server.",
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--json", action="store_true", help="eval: print the end of the run as JSON (anywhere)"
    )
    modes.add_argument(
        "--plain", action="store_true", help="eval: print it without decoration (anywhere)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_eval(commands)
    _add_serve(commands)
    _add_replay(commands)
    return parser


def _hoist_output_flags(argv: Sequence[str]) -> list[str]:
    """`argv` with `--json` and `--plain` moved before the subcommand: they are accepted on
    either side of it, and the top-level parser is the one that reads them."""
    words = list(argv)
    end = words.index("--") if "--" in words else len(words)
    head, tail = words[:end], words[end:]
    hoisted = [word for word in head if word in OUTPUT_FLAGS]
    return [*hoisted, *(word for word in head if word not in OUTPUT_FLAGS), *tail]


def main(argv: Sequence[str] | None = None) -> NoReturn:
    parser = build_parser()
    args = parser.parse_args(_hoist_output_flags(sys.argv[1:] if argv is None else argv))
    try:
        if args.command != "eval" and (args.json or args.plain):
            raise UsageError("--json and --plain shape what `eval` prints; leave them out here")
        status = args.handler(args)
    except UsageError as exc:
        print(f"osmosis-tui {args.command}: {exc}", file=sys.stderr)
        status = 2
    except KeyboardInterrupt:
        status = 130
    sys.exit(status)
