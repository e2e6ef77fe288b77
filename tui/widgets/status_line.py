"""The line under the table: how many rollouts show, the filters and sort, marks, follow mode,
the run's dispatch, pause."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from core.eval.dispatch_gate import DispatchState
from tui.widgets.dispatch_state import dispatch_text
from tui.widgets.table.sorting import describe
from tui.widgets.table.view import TableView


class StatusLine(Static):
    """What the table shows and how, in one line (cut with an ellipsis, never wrapped)."""

    DEFAULT_CSS = """
    StatusLine {
        height: 1;
        padding: 0 1;
        color: $text-muted;
        background: $panel;
    }
    """

    _line: Text | None = None

    def show(
        self,
        view: TableView,
        *,
        shown: int,
        total: int,
        marked: int,
        paused: bool,
        read_only: bool,
        dispatch: DispatchState | None = None,
        following: bool = False,
        watch: bool = False,
    ) -> None:
        """`watch`: a watch's table, whose columns the sort is named by."""
        filters = view.filters()
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{shown} of {total} shown", "bold")
        if filters:
            line.append("  filter: " + ", ".join(filters))
        line.append(f"  sort: {describe(view.sort, watch=watch)}")
        if marked:
            line.append(f"  {marked} marked", "yellow")
        line.append_text(dispatch_text(dispatch, steerable=not read_only))
        if following:
            line.append("  following (f stops)", "bold cyan")
        if paused:
            line.append("  SCREEN FROZEN (p: live again; the run goes on)", "bold yellow")
        if read_only:
            line.append("  replay (read-only)", "cyan")
        # Asked at every repaint, and the line seldom changes: rendering it again costs more
        # than making it.
        if line != self._line:
            self._line = line
            self.update(line, layout=False)  # one line always (CSS): no layout pass per update
