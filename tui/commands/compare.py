"""`osmosis-tui compare A B`: what changed from run A to run B (`core.eval.compare`), on the
compare screen, as text (`--plain`) or as JSON (`--json`);
with `--fail-on-regression [N]`, exit status 1 when more than N work items regressed."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from tui.commands import exit_codes
from tui.commands.argument_types import finite, non_negative_int
from tui.commands.attach import add_output_flag, results_root
from tui.commands.usage import UsageError

if TYPE_CHECKING:
    from core.eval.compare.comparison import Comparison


def add_compare(commands: Any) -> None:
    compare = commands.add_parser(
        "compare",
        help="what changed from one run to another, row by row, and whether it is noise",
        description="Compare two eval runs (osmosis-tui's or the official osmosis eval run's, "
        "in any mix): each work item paired by source row and attempt and classed (regressed, "
        "improved, error_changed, still_failing, still_passing, pending, skipped, only_in_A, "
        "only_in_B), each row's passes, mean reward, tokens and duration in both, and the "
        "pass-rate and mean-reward differences with a paired 95%% confidence interval. On a "
        "terminal it opens the compare screen; --plain prints it as text, --json as JSON.",
    )
    compare.add_argument("a", metavar="A", help="the run compared from: a name or a run folder")
    compare.add_argument("b", metavar="B", help="the run compared to: a name or a run folder")
    add_output_flag(compare)
    compare.add_argument(
        "--pass-threshold",
        type=finite,
        default=None,
        help="count a pass at this reward in both runs (default: each run's own threshold)",
    )
    compare.add_argument(
        "--fail-on-regression",
        type=non_negative_int,
        nargs="?",
        const=0,
        default=None,
        metavar="N",
        help="exit with status 1 when more than N work items regressed (N defaults to 0)",
    )
    compare.set_defaults(handler=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    from core.eval.gc_tuning import settled_for_a_run

    # Two runs of 100,000 items are 200,000 results alive at once: the collector, tuned as for
    # a run, stops rescanning them over and over while they are read and paired.
    with settled_for_a_run():
        comparison = load_comparison(args)
    max_regressed: int | None = args.fail_on_regression
    if args.json:
        from core.eval.compare.json_document import comparison_document

        document = comparison_document(comparison, max_regressed=max_regressed)
        print(json.dumps(document, ensure_ascii=False))
    else:
        from core.eval.compare.text_report import report_lines

        print("\n".join(report_lines(comparison)))
    regressed = comparison.count("regressed")
    if max_regressed is not None and regressed > max_regressed:
        if not args.json:
            print(
                f"{regressed:,} work items regressed, more than --fail-on-regression "
                f"{max_regressed} allows",
                file=sys.stderr,
            )
        return exit_codes.NOT_DONE
    return exit_codes.OK


def load_comparison(args: argparse.Namespace) -> Comparison:
    """The comparison `args.a` and `args.b` ask for; `UsageError` naming the argument at fault."""
    from core.eval.attach.run_list import find_run_folder
    from core.eval.compare.compared_run import CompareInputError, read_compared_run
    from core.eval.compare.comparison import compare_runs

    root = results_root(args)
    try:
        runs = []
        for label, given in (("A", args.a), ("B", args.b)):
            folder = find_run_folder(given, root)
            if folder is None:
                raise UsageError(f"{label}: {given}: neither a run folder nor a run under {root}")
            runs.append(read_compared_run(folder, label=label, threshold=args.pass_threshold))
        return compare_runs(runs[0], runs[1])
    except CompareInputError as exc:
        raise UsageError(str(exc)) from None
