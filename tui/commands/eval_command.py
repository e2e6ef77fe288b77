"""`osmosis-tui eval`: the subcommand, and running it (a plan from the flags, the question
before a real model is used, then the dashboard or the headless front end)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from tui.commands import exit_codes
from tui.commands.environment import LLM_API_KEY_ENV, SERVER_API_KEY_ENV
from tui.commands.eval_flags import add_eval_flags, eval_flag_problems, rerun_command
from tui.commands.usage import UsageError

if TYPE_CHECKING:
    from core.eval import EvalPlan


def add_eval(commands: Any) -> None:
    run = commands.add_parser(
        "eval",
        usage="%(prog)s [OPTIONS] [CONFIG]",
        help="run a dataset through rollout servers (the zero-setup demo without arguments)",
        description="Run every row of a dataset through rollout servers and leave a resumable "
        "results folder in the official layout. Without arguments: the bundled demo on an "
        "embedded server. With an Osmosis workspace's configs/eval/X.toml: that workspace's "
        "rollout server, from wherever inside the workspace the command runs.",
    )
    add_eval_flags(run)
    run.set_defaults(handler=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    from core.eval import (
        DEFAULT_OUTPUT,
        EvalRequest,
        InputError,
        RunFolderError,
        RunLocked,
        prepare,
    )
    from core.eval.plan.secret_values import secrets_in_environment
    from core.eval.plan.server_url import base_url
    from core.eval.reporter import OutputMode
    from core.eval.session import REFUSED_AT_START

    server_key = args.server_api_key or os.environ.get(SERVER_API_KEY_ENV) or None
    request = EvalRequest(
        config_path=args.config,
        servers=tuple(base_url(url) for url in args.server),
        servers_file=args.servers_file,
        server_api_key=server_key,
        dataset_file=args.dataset_file,
        chat_url=args.chat_url,
        chat_model=args.chat_model,
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
        hedge_after=args.hedge_after,
        requeue_stuck=args.requeue_stuck or 0,
        secrets_file=args.secrets_file,
        rollout_port=args.rollout_port,
        events_port=args.events_port,
        baseline=args.baseline,
        price_per_mtok=args.price_per_mtok,
        budget_usd=args.budget,
    )
    try:
        plan = prepare(request, flag_problems=eval_flag_problems(args))
    except InputError as exc:
        raise UsageError("bad input:\n" + str(exc)) from None
    if not _confirmed(plan, assume_yes=args.yes):
        print("not started; nothing was written", file=sys.stderr)
        return exit_codes.OK
    mode: OutputMode = "json" if args.json else "plain" if args.plain else "rich"
    rerun = rerun_command(args)
    try:
        with secrets_in_environment(plan.secrets):
            if args.headless or args.verbose or not sys.stdout.isatty():
                from tui.commands.headless import run_headless

                return run_headless(
                    plan,
                    mode=mode,
                    on_interrupt=args.on_interrupt,
                    rerun=rerun,
                    verbose=args.verbose,
                )
            from tui.commands.dashboard import run_dashboard

            return run_dashboard(plan, mode=mode, rerun=rerun)
    except RunLocked as exc:
        # Not bad input: another run lives. Exit 1, as the official tool exits for it.
        print(f"osmosis-tui eval: {exc}", file=sys.stderr)
        return exit_codes.NOT_DONE
    except InputError as exc:  # a port given by a flag in use: as the flags checked before
        raise UsageError("bad input:\n" + str(exc)) from None
    except (RunFolderError, *REFUSED_AT_START) as exc:
        # A results folder that cannot be used, a model that cannot be (the preflight): bad
        # input, found once the run began.
        raise UsageError(str(exc)) from None


def _confirmed(plan: EvalPlan, *, assume_yes: bool) -> bool:
    """Whether to go on: asked, on a terminal, before rollouts go to a real model (one that
    may cost money: not the stub); off a terminal, or with -y, it is not asked."""
    from core.eval.plan.prepare import pending_count
    from core.eval.plan.secret_values import STDIN

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
        f"Send {todo} {rollouts} to {plan.upstream.destination()}? [y/N] ",
        end="",
        file=sys.stderr,
        flush=True,
    )
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")
