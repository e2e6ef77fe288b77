"""`osmosis-tui attach`: its flags, the run it picks, and the dashboard opened on that run
while another process runs it (`tui.sources.attached`); also the hint a headless run prints
about it."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.commands import exit_codes
from tui.commands.usage import PROGRAM, UsageError

if TYPE_CHECKING:
    from core.eval import EvalPlan


def add_output_flag(parser: argparse.ArgumentParser) -> None:
    """`-o/--output`, the results root, as `eval` takes it (`runs` has it too)."""
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="results root, as given to eval (default: ./.osmosis/evals)",
    )


def results_root(args: argparse.Namespace) -> Path:
    """`-o` (or `eval`'s default), found as `eval` finds it: inside a workspace, from the
    workspace's root, from whichever of its folders the command runs."""
    from core.eval.plan.output_root import results_root as rooted

    return rooted(args.output, at=Path.cwd())


def add_attach(commands: Any) -> None:
    attach = commands.add_parser(
        "attach",
        help="open the dashboard on a run that another osmosis-tui eval runs",
        description="Watch and steer a live eval run from another terminal: the same "
        "dashboard, fed by the run's control socket. Cancels, untracks, requeues, pausing "
        "the dispatch and max-in-flight go to the run; sending rollouts by hand stays with "
        "the process that runs it; quitting detaches and the run goes on.",
    )
    attach.add_argument(
        "run",
        nargs="?",
        metavar="RUN",
        help="a run name under the results root, or a run folder (default: the live run "
        "under the root; asked when there are several)",
    )
    add_output_flag(attach)
    attach.set_defaults(handler=run_attach)


def attach_hint(plan: EvalPlan) -> str:
    """The line a headless run prints once it serves its control socket."""
    from core.eval.plan.output_root import results_root as rooted
    from core.eval.reporter import display_path

    output = plan.request.output
    shown = shlex.quote(display_path(output))
    # No -o when `attach` run here finds the run's root without it.
    found = rooted(None, at=Path.cwd()).absolute() == output.absolute()
    root = "" if found else f" -o {shown}"
    return f"to watch it on the dashboard: {PROGRAM} attach {shlex.quote(plan.run_name)}{root}"


def run_attach(args: argparse.Namespace) -> int:
    from core.eval.attach.client import ControlClient
    from core.eval.attach.unix_socket import ControlError

    folder = chosen_folder(args.run, results_root(args))
    if folder is None:
        return exit_codes.NOT_DONE

    async def attached() -> int:
        try:
            client = await ControlClient.connect(folder)
        except ControlError as exc:
            print(f"{PROGRAM} attach: {exc}", file=sys.stderr)
            return exit_codes.NOT_DONE
        await _watch(client)
        return exit_codes.OK

    return asyncio.run(attached())


async def _watch(client: Any) -> None:
    from tui.app import create_app
    from tui.sources.attached import AttachedSource

    source = AttachedSource(client)
    app = create_app(source, export_dir=Path.cwd())
    try:
        await app.run_async()
    finally:
        await source.close()
    name = client.run.name
    if source.ending is None:
        print(f"detached from {name}: it goes on", file=sys.stderr)
    else:
        print(f"{name}: {source.ending.reason}", file=sys.stderr)


def chosen_folder(run: str | None, output: Path) -> Path | None:
    """The run folder `run` names (a folder, or a name under `output`), or with no `run` the
    one live run under `output`, asked for when several are; None (said why) when there is
    none to attach to. `UsageError` when `run` names no run folder."""
    from core.eval.attach.run_list import find_run_folder, live_runs

    if run is not None:
        found = find_run_folder(run, output)
        if found is None:
            raise UsageError(f"{run}: neither a run folder nor a run under {output}")
        return found
    live = live_runs(output)
    if not live:
        print(
            f"{PROGRAM} attach: no live run under {output} ({PROGRAM} runs -o {output} lists "
            "them all)",
            file=sys.stderr,
        )
        return None
    if len(live) == 1:
        return live[0].folder
    names = [listed.name for listed in live]
    if not sys.stdin.isatty():
        raise UsageError(f"several runs are live under {output}: {', '.join(names)}; name one")
    for number, name in enumerate(names, start=1):
        print(f"  {number}. {name}", file=sys.stderr)
    print(f"attach to which run? [1-{len(names)}] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip()
    if answer.isdigit() and 1 <= int(answer) <= len(names):
        return live[int(answer) - 1].folder
    if answer in names:
        return live[names.index(answer)].folder
    raise UsageError(f"{answer!r} is none of the runs listed")
