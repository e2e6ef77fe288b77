"""`osmosis-tui eval` with the dashboard: run the app, then print the results table."""

from __future__ import annotations

import sys

from core.eval import EvalPlan
from core.eval.reporter import format_summary
from tui.app import create_app
from tui.sources.live import EvalSource


def run_dashboard(plan: EvalPlan, *, json_output: bool) -> int:
    def notice(message: str) -> None:
        # Notices come once the app runs, by which time `app` below exists.
        app.call_later(app.report, message, severity="warning")

    source = EvalSource(plan, on_notice=notice)
    app = create_app(source, export_dir=plan.request.output)
    app.run()
    if source.refused is not None:
        raise source.refused  # bad input found once running: the CLI exits 2 with it
    summary = source.summary
    if summary is None:
        print("the run did not finish; what finished is in the results folder", file=sys.stderr)
        return 1
    if json_output:
        import json

        print(json.dumps(summary.to_json()))
    else:
        print(format_summary(summary))
    return 0 if summary.status == "complete" else 1
