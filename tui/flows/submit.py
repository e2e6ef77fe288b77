"""Rollouts sent by hand (`n`, `r`): a new one typed into the form, or a finished one run
again under a new id. Either goes through the source; the cursor moves to the new row."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.rollout_record import RolloutRecord
from tui.screens.dialogs import NewRolloutScreen
from tui.sources.base import NewRollout

if TYPE_CHECKING:
    from tui.flows.host import FlowHost


class SubmitFlow:
    """Sends what the user asked for and says what became of it."""

    def __init__(self, app: FlowHost) -> None:
        self.app = app

    def ask_new(self) -> None:
        """`n`: the form, then the rollout it describes (nothing when it is closed)."""
        self.app.push_screen(NewRolloutScreen(), self._submit)

    def rerun(self, record: RolloutRecord) -> None:
        """`r`: the selected rollout again, if it has finished."""
        if record.finished:
            self._start(None, rerun_of=record.rollout_id)

    def _submit(self, rollout: NewRollout | None) -> None:
        if rollout is not None:
            self._start(rollout)

    def _start(self, rollout: NewRollout | None, rerun_of: str | None = None) -> None:
        self.app.run_worker(self._send(rollout, rerun_of), group="submit", exit_on_error=False)

    async def _send(self, rollout: NewRollout | None, rerun_of: str | None) -> None:
        app = self.app
        try:
            if rerun_of is not None:
                new_id = await app.source.rerun(rerun_of)
                app.report(f"re-running {rerun_of[:10]} as {new_id[:10]}")
            else:
                assert rollout is not None
                new_id = await app.source.submit(rollout)
                app.report(f"submitted {new_id[:10]}")
        except Exception as exc:
            app.report(f"could not submit: {exc}", severity="error")
            return
        app.repaint()
        app.table.move_cursor_to(new_id)
