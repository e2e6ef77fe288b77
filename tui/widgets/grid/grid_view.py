"""The rows × attempts grid as a widget: one line per dataset row, drawn with the Line API.

As the rollout table (widgets/table/), each line is rendered once into a cached `Strip`, kept
until that row changes, and a repaint touches only the visible lines of the rows that
changed; a run of thousands of rows costs a screenful of lines. Line 0 is the column header.
The cursor is a row (its `row_index`), not a line number: it stays on its row when the row
moves to another class. `enter` says which row it is on (`RowChosen`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip

from tui.widgets.cursor_rows import CursorRows
from tui.widgets.grid.rows import GLYPHS, AttemptGrid, GridRow, RowClass
from tui.widgets.table.strips import overlay

#: How each class is named in its column, and its style (theme-neutral, as the glyphs').
CLASS_CELLS: dict[RowClass, tuple[str, str]] = {
    "flaky": ("flaky", "bold yellow"),
    "always_fail": ("always fail", "red"),
    "always_pass": ("always pass", "green"),
    "all_skipped": ("all skipped", "dim"),
    "unfinished": ("unfinished", "dim"),
}
GAP = "  "
ROW_WIDTH = 6
CLASS_WIDTH = max(len(name) for name, _ in CLASS_CELLS.values())
ATTEMPTS_TITLE = "attempts"
MORE = "…"


@dataclass(frozen=True)
class GridLayout:
    """What fits a width: how many glyphs, and which pass@k columns."""

    glyphs: int
    """Attempts drawn; past them, `MORE` says there are more."""
    glyph_width: int
    pass_width: int
    ks: tuple[int, ...]


def layout(width: int, n: int, ks: Iterable[int]) -> GridLayout:
    """The columns for `n` attempts a row in `width` cells: every glyph when they fit, else
    the pass@k columns give way (the largest k first; pass@1 stays), then the glyphs are cut
    with `MORE`: the attempts are what the grid is for."""
    pass_width = max(len("pass"), 2 * len(str(n)) + 1)
    shown = list(ks)
    fixed = ROW_WIDTH + len(GAP) + CLASS_WIDTH + len(GAP) + len(GAP) + pass_width

    def room() -> int:
        return width - fixed - sum(len(GAP) + _k_width(k) for k in shown)

    while len(shown) > 1 and room() < n:
        shown.pop()
    glyph_width = max(min(max(n, len(ATTEMPTS_TITLE)), room()), 1)
    glyphs = n if n <= glyph_width else max(glyph_width - len(MORE), 0)
    return GridLayout(glyphs, glyph_width, pass_width, tuple(shown))


def _k_width(k: int) -> int:
    return max(len(f"pass@{k}"), 4)


def _cell(text: str, width: int, right: bool = False) -> str:
    text = text[:width]
    return text.rjust(width) if right else text.ljust(width)


def header_cells(shape: GridLayout) -> str:
    parts = [
        _cell("row", ROW_WIDTH, right=True),
        _cell("class", CLASS_WIDTH),
        _cell(ATTEMPTS_TITLE, shape.glyph_width),
        _cell("pass", shape.pass_width, right=True),
        *(_cell(f"pass@{k}", _k_width(k), right=True) for k in shape.ks),
    ]
    return GAP.join(parts)


def row_segments(row: GridRow, shape: GridLayout, style: dict[str, Style]) -> list[Segment]:
    """A row's line: its dataset row, class, a glyph per attempt, passes and pass@k."""
    name, class_style = CLASS_CELLS[row.row_class]
    segments = [
        Segment(_cell(row.label, ROW_WIDTH, right=True) + GAP),
        Segment(_cell(name, CLASS_WIDTH), style[class_style]),
        Segment(GAP),
    ]
    outcomes = row.outcomes[: shape.glyphs]
    for attempt in outcomes:
        glyph, glyph_style = GLYPHS[attempt]
        segments.append(Segment(glyph, style[glyph_style]))
    used = len(outcomes)
    if len(row.outcomes) > shape.glyphs:
        segments.append(Segment(MORE, style["dim"]))
        used += len(MORE)
    segments.append(Segment(" " * (shape.glyph_width - used) + GAP))
    passes = f"{row.passes}/{row.graded}" if row.graded else "-"
    cells = [_cell(passes, shape.pass_width, right=True)]
    for k in shape.ks:
        value = row.pass_at(k)
        cells.append(_cell("-" if value is None else f"{value:.2f}", _k_width(k), right=True))
    segments.append(Segment(GAP.join(cells)))
    return segments


class AttemptGridView(CursorRows):
    """The grid's rows in its order (flaky first), a cursor on one of them."""

    BINDINGS = [
        Binding(
            "enter",
            "choose",
            "Rollouts",
            tooltip="Back to the table, showing this row's rollouts",
            id="grid.choose",
        ),
    ]

    class RowChosen(Message):
        """`enter` on a row: the dashboard shows its rollouts."""

        def __init__(self, row: GridRow) -> None:
            super().__init__()
            self.row = row

    def __init__(self, grid: AttemptGrid, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.grid = grid
        self.cursor_row: int | None = None
        self._position: dict[int, int] = {}
        #: The grid's `reorders` when its order was last taken.
        self._reorders = -1
        self._strips: dict[int, Strip] = {}
        self._header: Strip | None = None
        self._shape: GridLayout | None = None
        self._shape_width = -1

    def on_mount(self) -> None:
        self.show_all()

    # -- data ------------------------------------------------------------------------------

    def show_all(self) -> None:
        """Every row drawn anew, in the grid's order; the cursor stays on its row."""
        self._strips.clear()
        self._reorder()
        self.refresh()

    def rows_changed(self, rows: set[int]) -> None:
        """These rows' counts changed: redraw them, and move them when their class did."""
        if not rows:
            return
        for row_index in rows:
            self._strips.pop(row_index, None)
        if self.grid.reorders != self._reorders:
            self._reorder()
            self.refresh()
            return
        top, height = int(self.scroll_offset.y), self._rows_height
        for row_index in rows:
            index = self._position[row_index]
            if top <= index < top + height:
                self.refresh(Region(0, index - top + 1, self.size.width, 1))

    def _reorder(self) -> None:
        self._reorders = self.grid.reorders
        order = self.grid.order
        self._position = {row_index: index for index, row_index in enumerate(order)}
        self.virtual_size = Size(max(self._shape_width, 0), len(order) + 1)
        if self.cursor_row not in self._position:
            self.cursor_row = order[0] if order else None
        self._scroll_to_cursor()

    # -- cursor ----------------------------------------------------------------------------

    @property
    def chosen(self) -> GridRow | None:
        return None if self.cursor_row is None else self.grid.rows.get(self.cursor_row)

    @property
    def row_count(self) -> int:
        return len(self.grid.order)

    @property
    def cursor_index(self) -> int:
        return 0 if self.cursor_row is None else self._position.get(self.cursor_row, 0)

    def move_cursor(self, index: int) -> None:
        order = self.grid.order
        if not order:
            return
        self.cursor_row = order[min(max(index, 0), len(order) - 1)]
        self._scroll_to_cursor()
        self.refresh()

    def action_choose(self) -> None:
        row = self.chosen
        if row is not None:
            self.post_message(self.RowChosen(row))

    # -- rendering -------------------------------------------------------------------------

    def _check_cache(self) -> GridLayout:
        width = self.scrollable_content_region.width
        if width != self._shape_width or self._shape is None:
            self._shape_width = width
            self._shape = layout(width, self.grid.n, self.grid.ks)
            self._strips.clear()
            self._header = None
        if self._restyled:
            self._restyled = False
            self._strips.clear()
            self._header = None
        return self._shape

    def render_line(self, y: int) -> Strip:
        shape = self._check_cache()
        width, base = self.size.width, self.rich_style
        if y == 0:
            if self._header is None:
                header = base + self.get_component_rich_style("cursor-rows--header")
                self._header = Strip([Segment(header_cells(shape), header)]).crop_extend(
                    0, width, header
                )
            return self._header
        index = int(self.scroll_offset.y) + y - 1
        order = self.grid.order
        if not 0 <= index < len(order):
            return Strip.blank(width, base)
        row_index = order[index]
        strip = self._strips.get(row_index)
        if strip is None:
            styles = {name: self._style(name) for name in _STYLE_NAMES}
            segments = row_segments(self.grid.rows[row_index], shape, styles)
            strip = Strip(segments).apply_style(base).crop_extend(0, width, base)
            self._strips[row_index] = strip
        if row_index == self.cursor_row:
            cursor = self.get_component_rich_style("cursor-rows--cursor")
            strip = overlay(strip, Style(bgcolor=cursor.bgcolor))
        return strip


_STYLE_NAMES = {
    "dim",
    *(style for _, style in GLYPHS.values()),
    *(style for _, style in CLASS_CELLS.values()),
}
