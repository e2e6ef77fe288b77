"""`osmosis-tui runs`: the runs under a results root, ours and the official tool's, with what
their files say of each (`core.eval.attach.run_list`): a table, or JSON with `--json`."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from tui.commands import exit_codes
from tui.commands.attach import add_output_flag, results_root
from tui.commands.usage import PROGRAM

if TYPE_CHECKING:
    from core.eval.attach.run_list import ListedRun

COLUMNS = ("NAME", "STATUS", "DONE", "PASS", "STARTED", "DURATION", "BY")
# A journal can hold a warning per line: a run's note is cut, not a screenful.
PROBLEM_CHARS = 500


def add_runs(commands: Any) -> None:
    runs = commands.add_parser(
        "runs",
        help="list the runs under the results root (--json: as JSON)",
        description="List the eval runs under the results root, osmosis-tui's and the official "
        "osmosis eval run's: status (running, incomplete, finished), work items done of the "
        "total, pass rate, start and duration. --json prints them as JSON.",
    )
    add_output_flag(runs)
    runs.set_defaults(handler=run_runs)


def run_runs(args: argparse.Namespace) -> int:
    from core.eval.attach.run_list import list_runs

    root = results_root(args)
    listed = list_runs(root)
    if args.json:
        document = {"root": str(root.absolute()), "runs": [run.as_json() for run in listed]}
        print(json.dumps(document))
        return exit_codes.OK
    if not listed:
        print(f"no runs under {root}")
        return exit_codes.OK
    print(_table([_cells(run) for run in listed]))
    _print_problems(listed)
    if any(run.attachable for run in listed):
        print(f"\nwatch a running one on the dashboard: {PROGRAM} attach NAME" + _root_flag(args))
    return exit_codes.OK


def _print_problems(listed: list[ListedRun]) -> None:
    """What could not be read of each run, so that "(unreadable parts)" is explained."""
    from core.eval.safe_text import terminal_safe

    troubled = [(run.name, run.problem) for run in listed if run.problem is not None]
    if troubled:
        print()
    for name, problem in troubled:
        cut = problem if len(problem) <= PROBLEM_CHARS else problem[:PROBLEM_CHARS] + "…"
        print(f"{terminal_safe(name)}: {terminal_safe(cut)}")


def _root_flag(args: argparse.Namespace) -> str:
    return "" if args.output is None else f" -o {args.output}"


def _cells(run: ListedRun) -> list[str]:
    from core.eval.attach.run_list import local_time
    from core.eval.duration_text import duration as shown_duration
    from core.eval.safe_text import terminal_safe

    total = "?" if run.total is None else str(run.total)
    rate = "-" if run.pass_rate is None else f"{run.pass_rate:.0%}"
    duration = shown_duration(run.duration_sec)
    status = run.status if run.problem is None else f"{run.status} (unreadable parts)"
    return [
        terminal_safe(run.name),
        status,
        f"{run.done}/{total}",
        rate,
        local_time(run.started_at),
        duration,
        run.tool,
    ]


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [list(COLUMNS), *rows]) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [list(COLUMNS), *rows]
    )
