"""Leaving the dashboard (DESIGN.md §2): with rollouts in flight, one question first.

Every way out comes here: `q`, ctrl+q, ctrl+c and the command palette's Quit. It leaves at
once when there is nothing to wind down: a replay, a run that is over, or a run that another
process runs (a dashboard attached to it only detaches; the question is that process's).
With rollouts in flight the quit screen asks whether to cancel them on their servers or leave
them (to their leases on a server that lives on, to end with the run's own server; or go
back); either way the run is interrupted, and the app exits once the run has wound down (the
app's `run_source`). Leaving at once (a second `q` while it
winds down) cuts no corner: the CLI ends the run and writes its results after the app is gone
(`tui.commands.dashboard.run_and_close`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.screens.dialogs import QuitScreen

if TYPE_CHECKING:
    from tui.flows.host import FlowHost


class QuitFlow:
    """The way out of one dashboard app."""

    def __init__(self, app: FlowHost) -> None:
        self.app = app
        #: Quitting has begun: the app exits as soon as the run has wound down.
        self.quitting = False

    def request(self) -> None:
        """Leave now, after winding the run down, or after asking how to."""
        app, source = self.app, self.app.source
        if isinstance(app.screen, QuitScreen):
            return  # the question is on the screen already
        # A second q while winding down leaves at once, like a second Ctrl-C: everything
        # finished is already journaled.
        if source.read_only or source.finished or self.quitting:
            app.exit()
            return
        if source.detaches_on_quit:  # the run goes on where it runs
            app.exit()
            return
        if app.run_state == "ended":  # the run stopped on an error: nothing to wind down
            app.exit()
            return
        in_flight = sum(1 for record in app.board if record.in_flight)
        if in_flight == 0:
            self._stop(cancel=False)
            return
        app.push_screen(
            QuitScreen(in_flight, servers_stop_with_run=source.servers_stop_with_run),
            self._chosen,
        )

    def _chosen(self, choice: str | None) -> None:
        if choice in ("cancel", "leave"):
            self._stop(cancel=choice == "cancel")

    def _stop(self, *, cancel: bool) -> None:
        """Interrupt the run; the app exits once the run has wound down."""
        self.quitting = True  # before any await: the run may end while the interrupt starts
        self.app.report(
            "cancelling in-flight rollouts, then quitting… (q again quits at once)"
            if cancel
            else "quitting… (q again quits at once)"
        )
        self.app.run_worker(self._interrupt(cancel), group="quit", exit_on_error=False)

    async def _interrupt(self, cancel: bool) -> None:
        app = self.app
        try:
            await app.source.interrupt(cancel_in_flight=cancel)
        except Exception as exc:
            app.report(f"could not stop the run cleanly: {exc}", severity="error")
            app.exit()
            return
        if app.run_state != "running":
            app.exit()
