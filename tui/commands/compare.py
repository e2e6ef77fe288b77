"""`osmosis-tui compare A B`: what changed from run A to run B (`core.eval.compare`), on the
compare screen (a terminal; with fewer runs given, the runs screen picks them), as text
(`--plain`) or as JSON (`--json`);
with `--fail-on-regression [N]`, exit status 1 when more than N work items regressed."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import orjson

from tui.commands import exit_codes
from tui.commands.argument_types import finite, non_negative_int
from tui.commands.attach import add_output_flag, results_root
from tui.commands.usage import UsageError

if TYPE_CHECKING:
    from core.eval.compare.comparison import Comparison
    from tui.compare_app import CompareApp


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
    compare.add_argument(
        "a",
        metavar="A",
        nargs="?",
        help="the run compared from: a name or a run folder (on a terminal, leave both runs "
        "out to pick them from the runs under -o)",
    )
    compare.add_argument(
        "b",
        metavar="B",
        nargs="?",
        help="the run compared to: a name or a run folder (on a terminal, a single run given "
        "is B, and A is picked from the runs under -o)",
    )
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
    on_screen = not args.json and not args.plain and sys.stdin.isatty() and sys.stdout.isatty()
    max_regressed: int | None = args.fail_on_regression
    comparison: Comparison | None
    if on_screen:
        # The compare screen; with fewer than two runs given, the runs screen first.
        app = _picking_app(args) if args.b is None else _compare_app(_loaded(args))
        app.run()
        if app.return_code:
            return exit_codes.NOT_DONE  # the screen itself failed (Textual said why)
        comparison = app.shown
        if comparison is None:
            return exit_codes.OK  # the user compared nothing: nothing regressed
    else:
        from core.eval.gc_tuning import paused_for_a_batch

        # Two runs of 100,000 items are 200,000 results alive at once, and their document a
        # million more objects, none in a cycle: the collector would walk them for nothing.
        with paused_for_a_batch():
            comparison = load_comparison(args)
            _print(comparison, args.json, max_regressed)
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


def _print(comparison: Comparison, as_json: bool, max_regressed: int | None) -> None:
    """Print the comparison as `--json` or `--plain` asks."""
    if as_json:
        from core.eval.compare.json_document import comparison_document

        document = comparison_document(comparison, max_regressed=max_regressed)
        # Two runs of 100,000 items make a 40 MB document: orjson prints it in a twentieth
        # of the standard printer's time (the same JSON, without spaces after `:` and `,`),
        # and as bytes, written without another copy as text.
        sys.stdout.flush()
        sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_APPEND_NEWLINE))
        sys.stdout.buffer.flush()
        return
    from core.eval.compare.text_report import report_lines

    print("\n".join(report_lines(comparison)))


def _loaded(args: argparse.Namespace) -> Comparison:
    from core.eval.gc_tuning import settled_for_a_run

    # Two runs of 100,000 items are 200,000 results alive at once: the collector, tuned as for
    # a run, stops rescanning them over and over while they are read and paired.
    with settled_for_a_run():
        return load_comparison(args)


def load_comparison(args: argparse.Namespace) -> Comparison:
    """The comparison `args.a` and `args.b` ask for; `UsageError` naming the argument at fault."""
    from core.eval.attach.run_list import find_run_folder
    from core.eval.compare.compared_run import CompareInputError
    from core.eval.compare.comparison import compare_folders

    root = results_root(args)
    if args.b is None:
        missing = "B" if args.a is not None else "A and B"
        raise UsageError(
            f"{missing}: missing; give two runs to compare (on a terminal, without --json "
            "or --plain, fewer open the runs screen to pick them)"
        )
    folders = []
    for label, given in (("A", args.a), ("B", args.b)):
        folder = find_run_folder(given, root)
        if folder is None:
            raise UsageError(f"{label}: {given}: neither a run folder nor a run under {root}")
        folders.append(folder)
    try:
        return compare_folders(folders[0], folders[1], threshold=args.pass_threshold)
    except CompareInputError as exc:
        raise UsageError(str(exc)) from None


def _compare_app(comparison: Comparison) -> CompareApp:
    from tui.compare_app import create_compare_app

    return create_compare_app(comparison)


def _picking_app(args: argparse.Namespace) -> CompareApp:
    """The runs screen, where the user picks A and B (a run given is B)."""
    from core.eval.attach.run_list import find_run_folder, list_runs
    from tui.compare_app import RunsChoice, create_compare_app

    root = results_root(args)
    given_b = None
    if args.a is not None:
        given_b = find_run_folder(args.a, root)
        if given_b is None:
            raise UsageError(f"B: {args.a}: neither a run folder nor a run under {root}")
    runs = list_runs(root)
    # A folder given by its path is the listed run it names, if the root holds it.
    given_b = next(
        (run.folder for run in runs if given_b and run.folder.resolve() == given_b.resolve()),
        given_b,
    )
    return create_compare_app(
        runs=RunsChoice(runs, root, given_b=given_b, threshold=args.pass_threshold)
    )
