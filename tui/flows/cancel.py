"""Cancelling rollouts on their servers from the dashboard (`c`, `C`): one confirmation,
then the board's cancel requests, and what the servers answered in the event log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from core.rollout_record import RolloutRecord
from tui.screens.dialogs import ConfirmScreen

if TYPE_CHECKING:
    from tui.app import DashboardApp

# How many of the servers' answers one report line quotes.
QUOTED_ANSWERS = 3


class CancelFlow:
    """Asks, then cancels; the rows show the outcome as the board's changes come in."""

    def __init__(self, app: DashboardApp) -> None:
        self.app = app

    def ask_one(self, record: RolloutRecord) -> None:
        """`c`: the selected rollout, if it is still in flight."""
        if not record.in_flight:
            return
        question = Text.assemble(
            "Cancel rollout ",
            (record.rollout_id, "bold"),
            f" (row {record.source_row_index}) on ",
            (record.server or "its server", "bold"),
            "?\n\nThe server stops its work; the row ends as cancelled.",
        )
        self._confirm_then_cancel(question, [record.rollout_id])

    def ask_marked(self) -> None:
        """`C`: the marked rollouts in flight, or, with none marked, all shown in flight."""
        app, table = self.app, self.app.table
        ids = [
            rid
            for rid in (table.marks or table.order)
            if (r := app.board.records.get(rid)) and r.in_flight
        ]
        if not ids:
            app.report("nothing in flight to cancel", severity="warning")
            return
        scope = "marked" if table.marks else "shown"
        question = Text(f"Cancel {len(ids)} {scope} rollouts on their servers?")
        self._confirm_then_cancel(question, ids)

    def _confirm_then_cancel(self, question: Text, ids: list[str]) -> None:
        def answered(yes: bool | None) -> None:
            if not yes:
                return
            if not self.app.source.can_send:  # the run ended while the question was up
                self.app.report(
                    "nothing was sent: the run has ended and closed its connections",
                    severity="warning",
                )
                return
            self.app.run_worker(self._cancel(ids), group="cancel", exit_on_error=False)

        self.app.push_screen(ConfirmScreen(question), answered)

    async def _cancel(self, ids: list[str]) -> None:
        app = self.app
        app.table.clear_marks(ids)
        answers = await app.board.cancel_on_server(ids)
        failed = {rid: answer for rid, answer in answers.items() if answer.startswith("error")}
        for rollout_id, answer in failed.items():
            app.report(f"cancel {rollout_id[:10]} failed: {answer}", severity="error")
        done = len(answers) - len(failed)
        if done:
            quoted = [rid for rid in answers if rid not in failed][:QUOTED_ANSWERS]
            summary = ", ".join(f"{rid[:10]}: {answers[rid]}" for rid in quoted)
            more = f" and {done - QUOTED_ANSWERS} more" if done > QUOTED_ANSWERS else ""
            app.report(f"cancel requested for {done}: {summary}{more}")
        app.repaint()
