"""`osmosis-tui report RUN [-o FILE]`: a finished run as one self-contained HTML page
(`core.eval.report`), from the board its replay ends with (`tui.sources.replay`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.commands import exit_codes
from tui.commands.usage import UsageError

if TYPE_CHECKING:
    from core.eval.report.run_report import RunReport
    from tui.sources.replay import ReplaySource

#: The page's name in the run folder, without -o.
REPORT_FILE = "report.html"


def add_report(commands: Any) -> None:
    report = commands.add_parser(
        "report",
        help="write a finished run as one HTML page, to open in a browser",
        description="Write a finished run (osmosis-tui's, or an official osmosis eval run's "
        "folder) as one self-contained HTML page: the run timeline, the distributions of "
        "phase times, model-call latency, tokens and reward, the failures with their "
        "conversations, and a row per rollout (failures first, at most 2,000). The page "
        "loads nothing from the network, so it can be mailed or attached as it is.",
    )
    report.add_argument("run", type=Path, metavar="RUN", help="the run folder")
    report.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"where to write the page (default: RUN/{REPORT_FILE})",
    )
    report.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace) -> int:
    from core.eval.report.page import render_report
    from core.eval.results.durable import write_bytes_atomic
    from tui.sources.replay import ReplayError, ReplaySource

    folder: Path = args.run
    if not folder.exists():
        raise UsageError(f"{folder}: no such folder")
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder (give the run folder)")
    try:
        source = ReplaySource(folder)
    except ReplayError as exc:
        raise UsageError(f"{exc} (not a run folder?)") from None
    output: Path = args.output if args.output is not None else source.folder / REPORT_FILE
    page = render_report(report_of(source))
    try:
        # Whole or not at all, and owner-only like every file of a run folder: the page holds
        # the run's prompts and answers; sharing it is the user's own step.
        write_bytes_atomic(output, page.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"{output}: cannot write the report ({exc.strerror or exc})") from None
    for warning in source.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(output)
    return exit_codes.OK


def report_of(source: ReplaySource) -> RunReport:
    """What the page is drawn from: `source` played to its end (the board, and the stuck
    flags on its time line, as the run ended)."""
    from core.eval.final_transcript import final_transcript
    from core.eval.report.run_report import RunReport
    from core.rollout_record import RolloutRecord
    from core.transcript import Transcript, preview_path, read_preview

    source.to_end()
    trials, previews = source.trials_root, source.preview_root

    def conversation(record: RolloutRecord) -> Transcript | None:
        """As the dashboard's transcript shows a finished rollout: its whole conversation,
        else the last preview its server wrote (a failure's sample often has no messages)."""
        found = final_transcript(record, trials)
        if found is not None or previews is None:
            return found
        path = preview_path(previews, record.rollout_id)
        return None if path is None else read_preview(path, root=previews)

    return RunReport(
        name=source.folder.resolve().name,
        timeline=source.timeline,
        records=list(source.board),
        zero=source.clock() - source.played,  # the board's clock at the recording's 0
        progress=source.progress(),
        pass_threshold=source.pass_rule.threshold,
        transcript_of=conversation,
        warnings=source.warnings,
    )
