"""`FlowHost`: the members of the dashboard app that its flows use, and nothing else.

A flow is handed the app at start-up and acts through these: the source and its board, the
table (its marks and the rows shown), the event log, the messages it reports, and Textual's
own ways to ask (a modal screen), to work in the background (a worker) and to leave. Naming
them here keeps the flows from importing the app, and says what a flow may touch.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from rich.console import RenderableType
    from textual.screen import Screen, ScreenResultCallbackType
    from textual.worker import Worker

    from core.board import RolloutBoard
    from core.rollout_record import RolloutRecord
    from tui.sources.base import DashboardSource
    from tui.widgets.event_log import EventLog
    from tui.widgets.table.rollout_table import RolloutTable

ScreenResult = TypeVar("ScreenResult")


class FlowHost(Protocol):
    """What a flow may use of the dashboard app (`tui.app.DashboardApp` is the one host)."""

    source: DashboardSource
    board: RolloutBoard
    """The board shown (a replay going back shows a new one)."""
    table: RolloutTable
    event_log: EventLog
    run_state: Literal["idle", "running", "ended"]

    @property
    def screen(self) -> Screen[object]: ...

    def selected(self) -> RolloutRecord | None:
        """The rollout of the table's cursor row, if any."""
        ...

    def report(
        self, message: str, *, severity: str = "information", topic: str | None = None
    ) -> None:
        """A line in the event log, and a notification (one per `topic`: the latest)."""
        ...

    def repaint(self) -> None: ...

    def update_summary(self) -> None: ...

    def use_board(self, board: RolloutBoard) -> None:
        """Show `board` from now on (a replay went back)."""
        ...

    def push_screen(
        self,
        screen: Screen[ScreenResult] | str,
        callback: ScreenResultCallbackType[ScreenResult] | None = None,
        wait_for_dismiss: Literal[False] = False,
        *,
        mode: str | None = None,
    ) -> Any: ...

    def run_worker(  # noqa: PLR0917 - Textual's signature
        self,
        work: Coroutine[Any, Any, None],
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> Worker[None]: ...

    def exit(
        self,
        result: Any = None,
        return_code: int = 0,
        message: RenderableType | None = None,
    ) -> None: ...


__all__ = ["FlowHost"]
