"""`CursorRows`: a list drawn on the Line API, a header on its first line and one row per line
below it, with a cursor the keys, a page and a click move; what the compare table and the rows ×
attempts grid share (the rollout table keeps its own, with marks and sorted headers).

A subclass says how many rows it has (`row_count`), where the cursor is (`cursor_index`) and
what moving it means (`move_cursor`), and draws its lines; styles it parses by name are kept
(`_style`), and `_restyled` says when the theme's component styles must be read again.
"""

from __future__ import annotations

from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.scroll_view import ScrollView


class CursorRows(ScrollView, can_focus=True):
    """A header line, then the rows; the cursor on one of them (see the module docstring)."""

    COMPONENT_CLASSES = {"cursor-rows--header", "cursor-rows--cursor"}
    DEFAULT_CSS = """
    CursorRows {
        height: 1fr;
        overflow-x: hidden;
        scrollbar-size-vertical: 1;
        scrollbar-gutter: stable;
        background: $surface;
    }
    CursorRows > .cursor-rows--header {
        background: $panel;
        color: $text-muted;
        text-style: bold;
    }
    CursorRows > .cursor-rows--cursor {
        background: $primary 25%;
    }
    CursorRows:focus > .cursor-rows--cursor {
        background: $primary 55%;
    }
    """
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", tooltip="The row above", show=False, id="rows.up"),
        Binding("down,j", "cursor(1)", "Down", tooltip="The row below", show=False, id="rows.down"),
        Binding(
            "pageup",
            "cursor_page(-1)",
            "Page up",
            tooltip="One screen of rows up",
            show=False,
            id="rows.page-up",
        ),
        Binding(
            "pagedown",
            "cursor_page(1)",
            "Page down",
            tooltip="One screen of rows down",
            show=False,
            id="rows.page-down",
        ),
        Binding(
            "home,g",
            "cursor_edge(0)",
            "First",
            tooltip="The first row shown",
            show=False,
            id="rows.first",
        ),
        Binding(
            "end,G",
            "cursor_edge(1)",
            "Last",
            tooltip="The last row shown",
            show=False,
            id="rows.last",
        ),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._styles: dict[str, Style] = {}
        #: The theme changed since the component styles were last read.
        self._restyled = True

    # -- what a subclass says ------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        raise NotImplementedError

    @property
    def cursor_index(self) -> int:
        """The cursor's line among the rows (0: the first row, under the header)."""
        raise NotImplementedError

    def move_cursor(self, index: int) -> None:
        """Put the cursor on the row at `index` (clamped to the rows), and show it."""
        raise NotImplementedError

    # -- moving and scrolling ------------------------------------------------------------------

    @property
    def _rows_height(self) -> int:
        return max(self.size.height - 1, 0)

    def _scroll_to_cursor(self) -> None:
        if not self.size.height or not self.row_count:
            return
        index = self.cursor_index
        top, rows = int(self.scroll_offset.y), max(self._rows_height, 1)
        if index < top:
            self.scroll_to(y=index, animate=False, force=True)
        elif index >= top + rows:
            self.scroll_to(y=index - rows + 1, animate=False, force=True)

    def on_resize(self) -> None:
        self._scroll_to_cursor()

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(self.cursor_index + delta)

    def action_cursor_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_index + direction * max(self._rows_height - 1, 1))

    def action_cursor_edge(self, end: int) -> None:
        self.move_cursor(self.row_count - 1 if end else 0)

    def on_click(self, event: events.Click) -> None:
        index = int(self.scroll_offset.y) + event.y - 1
        if event.y >= 1 and 0 <= index < self.row_count:
            self.move_cursor(index)

    # -- styles --------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._restyled = True

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = Style.parse(name) if name else Style()
        return style


__all__ = ["CursorRows"]
