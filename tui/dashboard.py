"""`osmosis-tui eval` with the dashboard: run the app, then print the end of the run."""

from __future__ import annotations

import sys

from core.eval import EvalPlan
from core.eval.reporter import OutputMode, RunReport, print_report, work_item_rollouts
from tui.app import create_app
from tui.sources.live import EvalSource


def run_dashboard(plan: EvalPlan, *, mode: OutputMode, rerun: str) -> int:
    """Run `plan` on the dashboard; once it is closed, print the end of the run in `mode`
    (`rerun`: the command that repeats the run's inputs, for the hints)."""

    def notice(message: str) -> None:
        # Notices come once the app runs, by which time `app` below exists.
        app.call_later(app.report, message, severity="warning")

    source = EvalSource(plan, on_notice=notice)
    source.session.claim_name()  # a name in use is refused before the dashboard opens
    app = create_app(source, export_dir=plan.request.output)
    app.run()
    if source.refused is not None:
        raise source.refused  # bad input found once running: the CLI exits 2 with it
    summary = source.summary
    if summary is None:
        print("the run did not finish; what finished is in the results folder", file=sys.stderr)
        return 1
    print_report(RunReport(summary, plan, work_item_rollouts(source.board), rerun), mode)
    return 0 if summary.status == "complete" else 1
