"""`osmosis-tui eval`'s flags: declared (the official ones, then ours), checked against each
other, and written back as the command that repeats a run's inputs."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from tui.commands.argument_types import (
    finite,
    fixed_port,
    hedge_after,
    http_url,
    positive_int,
    price_per_mtok,
    seconds,
    usd,
)
from tui.commands.environment import LLM_API_KEY_ENV, SERVER_API_KEY_ENV
from tui.commands.usage import PROGRAM

if TYPE_CHECKING:
    from core.eval.errors import InputProblem

#: The output modes, accepted anywhere on the command line (as the official CLI accepts them).
OUTPUT_FLAGS = ("--json", "--plain")
#: What the official `osmosis eval run` does with the Osmosis Platform, which we never reach.
UPLOAD_COMPATIBLE = (
    "the results folder is upload-compatible: once the run is complete, upload it with "
    "`osmosis eval upload <folder>` (the official CLI)"
)


def add_eval_flags(run: argparse.ArgumentParser) -> None:
    """Declare the flags of `eval` on its parser `run`: the official ones, then ours."""
    run.add_argument("config", nargs="?", type=Path, help="Osmosis eval config (TOML)")
    official = run.add_argument_group("as `osmosis eval run`")
    official.add_argument(
        "--name",
        help="run name; the same name resumes that run "
        "(default: <config or dataset name>-<local time>)",
    )
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
        "--rows",
        help='source rows, e.g. "3,7,10-20" (0-based), instead of evaluation.limit '
        "(default: every row, or the first evaluation.limit)",
    )
    official.add_argument(
        "--fresh", action="store_true", help="move an existing run aside, start over"
    )
    official.add_argument(
        "--retry-failed",
        action="store_true",
        help="on resume, also re-run failed and skipped items",
    )
    official.add_argument(
        "--max-in-flight",
        type=positive_int,
        help="rollouts in flight at once (default: evaluation.batch_size, else the servers' "
        "capacity, else 1; never more than that capacity)",
    )
    official.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="do not ask before sending rollouts to a real model (asked only on a terminal)",
    )
    official.add_argument(
        "--rollout-port",
        type=fixed_port,
        metavar="N",
        help="fixed port for the workspace rollout server (default: a free one)",
    )
    official.add_argument(
        "--listener-port",
        type=fixed_port,
        metavar="N",
        help="fixed port for the model gateway (default: a free one)",
    )
    official.add_argument(
        "--advertise-url",
        type=http_url,
        metavar="URL",
        help="the model gateway's base URL as the rollouts reach it (a proxy or tunnel)",
    )
    official.add_argument(
        "--verbose",
        action="store_true",
        help="stream the run's log to stderr (without the dashboard)",
    )
    for flag in OUTPUT_FLAGS:
        # Hoisted to the top-level parser before parsing (see tui.cli._hoist_output_flags);
        # listed here so that `eval --help` shows them.
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
        type=http_url,
        metavar="URL",
        help="a running rollout server (repeat for several); an http URL whose host name "
        "resolves to several addresses (a headless Service) is that many servers, looked up "
        "again while the run lives",
    )
    ours.add_argument(
        "--servers-file",
        type=Path,
        metavar="FILE",
        help="rollout server URLs, one a line (# comments), read again when the file changes: "
        "servers added are used, servers removed get no new work",
    )
    ours.add_argument(
        "--server-api-key",
        default=None,
        help=f"bearer for the rollout servers (default: ${SERVER_API_KEY_ENV})",
    )
    ours.add_argument(
        "--chat-url",
        help=f"the model behind the gateway: an OpenAI-compatible base URL (key from "
        f"${LLM_API_KEY_ENV}), or 'stub' (default: the stub model, or with a config its "
        "model_path through LiteLLM)",
    )
    ours.add_argument(
        "--chat-model",
        metavar="NAME",
        help="the model name the --chat-url server is asked for, sent as given "
        "(default: the config's model_path without its provider prefix, else osmosis-stub)",
    )
    ours.add_argument(
        "--limit",
        type=positive_int,
        help="the first N selected rows (default: evaluation.limit unless --rows, else every row)",
    )
    ours.add_argument(
        "--n", type=positive_int, help="attempts per row (default: evaluation.n, else 1)"
    )
    ours.add_argument(
        "--agent-timeout",
        type=seconds,
        help="workflow deadline per rollout, s "
        "(default: evaluation.agent_workflow_timeout_s, else none)",
    )
    ours.add_argument(
        "--grader-timeout",
        type=seconds,
        help="grader deadline per rollout, s (default: evaluation.grader_timeout_s, else none)",
    )
    ours.add_argument(
        "--pass-threshold",
        type=finite,
        help="reward needed to pass (default: evaluation.pass_threshold, else 1.0)",
    )
    ours.add_argument(
        "--events-port",
        type=fixed_port,
        metavar="N",
        help="fixed port for the receiver of the servers' ownership events, where "
        "OSMOSIS_ROLLOUT_OTLP_ENDPOINT points: a --server server started with it reaches every "
        "run given the same port (default: a free one, new each run)",
    )
    ours.add_argument(
        "--stuck-after",
        type=seconds,
        help="flag rollouts stuck in a phase this long, s "
        "(default: 3x the phase's median duration, at least 30 s)",
    )
    ours.add_argument(
        "--hedge-after",
        type=hedge_after,
        metavar="SECONDS|Nx",
        help="send a work item still in flight after SECONDS (or N times the median duration "
        "of finished items) a second time, to another server when there is one; the first "
        "attempt to succeed is its result, the other is cancelled (default: never)",
    )
    ours.add_argument(
        "--requeue-stuck",
        type=positive_int,
        metavar="N",
        help="cancel a work item's rollout once it is flagged stuck (see --stuck-after) and "
        "run the item again, at most N times per item (default: never)",
    )
    ours.add_argument(
        "--baseline",
        metavar="RUN",
        help="compare live with this run (a name under the results root, or a run folder; "
        "ours or the official tool's, of the same dataset file): the table's base column, "
        "and improved/regressed counts",
    )
    ours.add_argument(
        "--price-per-mtok",
        type=price_per_mtok,
        metavar="IN,OUT",
        help="the model's price in USD per million input and output tokens, for a model "
        "LiteLLM's price table does not know (the stub, a --chat-url server's); each call is "
        "priced from its token counts",
    )
    ours.add_argument(
        "--budget",
        type=usd,
        metavar="USD",
        help="the most the run's model calls may cost: dispatch pauses when the projected "
        "total would pass it, and the run stops (resumable) when the spend reaches it; "
        "refused when the model has no known price",
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
        help="headless Ctrl-C: cancel in-flight rollouts on the server, or leave them",
    )


def eval_flag_problems(args: argparse.Namespace) -> list[InputProblem]:
    """What is wrong with the flags themselves, reported with the other input problems."""
    from core.eval.errors import InputProblem
    from core.eval.gateway.upstream_choice import STUB

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
    if args.chat_model is not None and args.chat_url in (None, STUB):
        problem(
            "--chat-model",
            "names the model a --chat-url server is asked for: give --chat-url URL too "
            "(without it the model is the stub, or the config's model_path through LiteLLM)",
        )
    if args.chat_model is not None and not args.chat_model.strip():
        problem("--chat-model", "is empty: give the name the --chat-url server knows the model by")
    if args.fresh and args.retry_failed:
        problem("--fresh", "starts over, and --retry-failed resumes: pick one")
    given_servers = args.server or args.servers_file is not None
    if args.config is None and not given_servers and args.dataset_file is not None:
        problem(
            "--dataset-file",
            "needs a config, --server or --servers-file (the demo has its own data)",
        )
    return problems


def rerun_command(args: argparse.Namespace) -> str:
    """The command that runs the same inputs again, as given (for the resume and retry hints;
    never a key: those come from the environment or a file)."""
    words = [PROGRAM, "eval"]
    if args.config is not None:
        words.append(str(args.config))
    for url in args.server:
        words += ["--server", url]
    if args.servers_file is not None:
        words += ["--servers-file", str(args.servers_file)]
    repeated = (
        ("--output", args.output),
        ("--dataset-file", args.dataset_file),
        ("--secrets-file", args.secrets_file),
        ("--chat-url", args.chat_url),
        ("--chat-model", args.chat_model),
        ("--rows", args.rows),
        ("--limit", args.limit),
        ("--n", args.n),
        ("--agent-timeout", args.agent_timeout),
        ("--grader-timeout", args.grader_timeout),
        ("--pass-threshold", args.pass_threshold),
        ("--rollout-port", args.rollout_port),
        ("--listener-port", args.listener_port),
        ("--events-port", args.events_port),
        ("--advertise-url", args.advertise_url),
        ("--baseline", args.baseline),
        ("--budget", args.budget),
    )
    for flag, value in repeated:
        if value is not None:
            words += [flag, _as_typed(value)]
    price = args.price_per_mtok
    if price is not None:
        words += [
            "--price-per-mtok",
            f"{_as_typed(price.input_per_mtok)},{_as_typed(price.output_per_mtok)}",
        ]
    return shlex.join(words)


def _as_typed(value: object) -> str:
    """A flag's value as a user types it: `15`, not the float's `15.0`."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
