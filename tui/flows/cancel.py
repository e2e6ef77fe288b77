"""Cancelling rollouts on their servers from the dashboard (`c`, `C`): one confirmation,
then the board's cancel requests, and what the servers answered in the event log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from core.rollout_record import RolloutRecord
from tui.screens.dialogs import ConfirmScreen
from tui.widgets.format import plain

if TYPE_CHECKING:
    from tui.flows.host import FlowHost

# How many of the servers' answers one report line quotes.
QUOTED_ANSWERS = 3


class CancelFlow:
    """Asks, then cancels; the rows show the outcome as the board's changes come in."""

    def __init__(self, app: FlowHost) -> None:
        self.app = app

    def ask_one(self, record: RolloutRecord) -> None:
        """`c`: the selected rollout, if its server can still cancel it."""
        if not self.app.board.can_cancel(record):
            return
        # A watch's rollout is no dataset row's: its run says whose it is.
        reported_by = record.reported_by
        whose = (
            f" (row {record.source_row_index})"
            if reported_by is None
            else f" (run {reported_by.run})"
            if reported_by.run
            else ""
        )
        question = Text.assemble(
            "Cancel rollout ",
            plain(record.rollout_id, "bold"),
            plain(whose),
            " on ",
            plain(record.server or "its server", "bold"),
            "?\n\nThe server stops its work; ",
            "the row ends as cancelled."
            if not record.untracked
            else "it is no longer tracked here, so the server's answer is all the row will show.",
        )
        self._confirm_then_cancel(question, [record.rollout_id])

    def ask_marked(self) -> None:
        """`C`: the marked rollouts, or, with none marked, all shown; those already over are
        left out, and the question says how many and why."""
        app, table = self.app, self.app.table
        scope = "marked" if table.marks else "shown"
        records = app.board.records
        # The marked ones in the board's order (a mark may be on a row filtered out of view).
        chosen = [r for r in records.values() if r.rollout_id in table.marks] or [
            records[rid] for rid in table.order
        ]
        targets = [record for record in chosen if app.board.can_cancel(record)]
        if not targets:
            app.report(f"nothing to cancel: the {scope} rollouts are over", severity="warning")
            return
        question = Text(f"Cancel {len(targets)} {scope} rollouts on their servers?")
        untracked = sum(record.untracked for record in targets)
        if untracked:
            question.append(
                f"\n\n{untracked} of them no longer tracked here: their servers' answers "
                "are all their rows will show."
            )
        if len(chosen) > len(targets):
            question.append(f"\n\n{len(chosen) - len(targets)} {scope} already over: left out.")
        self._confirm_then_cancel(question, [record.rollout_id for record in targets])

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
        if len(answers) < len(ids):  # over between the question and the answer to it
            app.report(f"{len(ids) - len(answers)} ended before the cancel was sent")
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
