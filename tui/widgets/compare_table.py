"""The compare screen's table: one line per source row of two compared runs, each side's
passes, mean reward, tokens, duration and pass@k as "A → B", and the classes of its work
items, drawn with Textual's Line API.

Built as the rollout table is (widgets/table/): each row's line is rendered once into a
cached `Strip`, kept until the width or the theme changes, so 100,000 rows scroll as ten do.
Rows that regressed are tinted with the theme's error colour, improved ones with its success
colour, a changed error with its warning colour; rows whose content differs between the runs
(never compared) are drawn muted.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip

from core.eval.compare.comparison import RowComparison, RowSide
from core.eval.compare.outcomes import CHANGED, CLASSES, ItemClass
from core.eval.compare.text_report import side_cells
from tui.widgets.cursor_rows import CursorRows
from tui.widgets.table.columns import cell
from tui.widgets.table.strips import overlay
from tui.widgets.table.whole_cell_scrollbar import WholeCellScrollBarRender

#: The style name of each class where a cell names it (ANSI names: every theme reads them).
CLASS_STYLES: dict[ItemClass, str] = {
    "regressed": "bold red",
    "improved": "bold green",
    "error_changed": "yellow",
    "pending": "blue",
    "only_in_A": "magenta",
    "only_in_B": "magenta",
}
#: The tint of a row, by the most telling class among its items (regressed above all).
TINTS: dict[ItemClass, str] = {
    "regressed": "compare-table--regressed",
    "improved": "compare-table--improved",
    "error_changed": "compare-table--error-changed",
}


@dataclass(frozen=True)
class CompareColumn:
    key: str
    title: str
    width: int
    align: str = "left"
    #: Narrow tables drop these, 1 first (0: never dropped).
    drop: int = 0


COLUMNS = (
    CompareColumn("row", "row", 7, "right"),
    CompareColumn("passes", "passes A → B", 14),
    CompareColumn("reward", "reward A → B", 16, drop=3),
    CompareColumn("pass_at_k", "pass@k A → B", 18, drop=4),
    CompareColumn("tokens", "tokens A → B", 18, drop=1),
    CompareColumn("duration", "duration A → B", 17, drop=2),
    CompareColumn("classes", "classes", 18),
)
CompareLayout = tuple[tuple[CompareColumn, int], ...]


def layout_columns(width: int, *, pass_at_k: bool) -> CompareLayout:
    """The columns that fit `width` (pass@k only when both runs made several attempts), the
    spare width given to the classes."""
    shown = [column for column in COLUMNS if pass_at_k or column.key != "pass_at_k"]
    for level in sorted({column.drop for column in shown if column.drop}):
        if sum(column.width for column in shown) <= width:
            break
        shown = [column for column in shown if column.drop != level]
    spare = max(width - sum(column.width for column in shown), 0)
    return tuple(
        (column, column.width + (spare if column.key == "classes" else 0)) for column in shown
    )


def _pair(a: str, b: str) -> str:
    return f"{a} → {b}"


def _pass_at_k(a: RowSide | None, b: RowSide | None) -> str:
    """pass@k at the largest k both sides have, as "@4 0.50 → 1.00"."""
    if a is None or b is None or a.pass_at_k is None or b.pass_at_k is None:
        return "-"
    shared = a.pass_at_k.keys() & b.pass_at_k.keys()
    if not shared:
        return "-"
    k = max(shared)
    return f"@{k} {a.pass_at_k[k]:.2f} → {b.pass_at_k[k]:.2f}"


def class_cells(row: RowComparison) -> list[tuple[str, str]]:
    """The classes of a row's items as (text, style name): changed ones first, counted when
    more than one; a row whose content was not compared (the header's notes say so) says why
    instead."""
    if row.content == "differs":
        return [("content differs", "")]
    if row.content == "unchecked":
        return [("content unchecked", "")]
    ordered = sorted(
        (name for name in CLASSES if row.classes.get(name)), key=lambda name: name not in CHANGED
    )
    return [
        (
            name if row.classes[name] == 1 else f"{name} ×{row.classes[name]}",
            CLASS_STYLES.get(name, ""),
        )
        for name in ordered
    ]


def row_cells(row: RowComparison) -> dict[str, str]:
    """Each column's text for one row (the classes are drawn apart: `class_cells`)."""
    a, b = side_cells(row.a), side_cells(row.b)
    passes, reward, tokens, duration = (_pair(x, y) for x, y in zip(a, b, strict=True))
    return {
        "row": str(row.source_row),
        "passes": passes,
        "reward": reward,
        "pass_at_k": _pass_at_k(row.a, row.b),
        "tokens": tokens,
        "duration": duration,
    }


def row_tint(row: RowComparison) -> str | None:
    """The component class of the row's tint; None for the table's own background."""
    return next((tint for name, tint in TINTS.items() if row.classes.get(name)), None)


class CompareTable(CursorRows):
    """The rows shown (`show`), in their order; line 0 is the column header."""

    COMPONENT_CLASSES = {"compare-table--dim", *TINTS.values()}
    DEFAULT_CSS = """
    CompareTable > .compare-table--dim {
        color: $text-muted;
    }
    CompareTable > .compare-table--regressed {
        background: $error 22%;
    }
    CompareTable > .compare-table--improved {
        background: $success 15%;
    }
    CompareTable > .compare-table--error-changed {
        background: $warning 12%;
    }
    """

    class CursorMoved(Message):
        """The cursor is on another row (or on none)."""

        def __init__(self, row: RowComparison | None) -> None:
            super().__init__()
            self.row = row

    def __init__(self, *, pass_at_k: bool, **kwargs: str) -> None:
        """`pass_at_k`: both runs made several attempts per row, so the column says
        something."""
        super().__init__(**kwargs)
        self.pass_at_k = pass_at_k
        self.rows: Sequence[RowComparison] = ()
        self.changed_at: list[int] = []
        self.cursor = 0
        self._strips: dict[int, Strip] = {}
        self._header: Strip | None = None
        self._layout: CompareLayout = ()
        self._layout_width = -1
        self._cached_styles: tuple[Style, ...] = ()
        self._dim = Style()
        self._tints: dict[str, Style] = {}
        self._cursor = Style()

    def on_mount(self) -> None:
        self.vertical_scrollbar.renderer = WholeCellScrollBarRender  # type: ignore[misc]

    # -- data and cursor ---------------------------------------------------------------------

    def show(self, rows: Sequence[RowComparison]) -> None:
        """Show `rows`, in their order; the cursor stays on its source row when it is shown,
        else goes to the first."""
        current = self.cursor_row
        self.rows = rows
        #: Where the rows with a changed item are, ascending: `n` and `p` look them up here
        #: rather than walking 100,000 rows that did not change.
        self.changed_at = [index for index, row in enumerate(rows) if row.changed]
        self._strips.clear()
        self.cursor = 0
        if current is not None:
            self.cursor = next(
                (i for i, row in enumerate(rows) if row.source_row == current.source_row), 0
            )
        self.virtual_size = Size(max(self._layout_width, 0), len(rows) + 1)
        self.scroll_to(y=0, animate=False, force=True)
        self._scroll_to_cursor()
        self.refresh()
        self.post_message(self.CursorMoved(self.cursor_row))

    @property
    def row_count(self) -> int:
        return len(self.rows)

    @property
    def cursor_index(self) -> int:
        return self.cursor

    @property
    def cursor_row(self) -> RowComparison | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def move_cursor(self, index: int) -> None:
        if not self.rows:
            return
        index = min(max(index, 0), len(self.rows) - 1)
        previous, self.cursor = self.cursor, index
        if previous != index:
            self._refresh_lines((previous, index))
            self.post_message(self.CursorMoved(self.cursor_row))
        self._scroll_to_cursor()

    def next_change(self, direction: int) -> bool:
        """Move the cursor to the next (1) or previous (-1) row with a changed item; False,
        the cursor left where it is, when there is none that way."""
        changed = self.changed_at
        if direction > 0:
            position = bisect.bisect_right(changed, self.cursor)
            found = changed[position] if position < len(changed) else None
        else:
            position = bisect.bisect_left(changed, self.cursor)
            found = changed[position - 1] if position > 0 else None
        if found is None:
            return False
        self.move_cursor(found)
        return True

    def _refresh_lines(self, indexes: Sequence[int]) -> None:
        top, width = int(self.scroll_offset.y), self.size.width
        for index in indexes:
            if top <= index < top + self._rows_height:
                self.refresh(Region(0, index - top + 1, width, 1))

    # -- rendering ---------------------------------------------------------------------------

    def _check_cache(self) -> None:
        """Drop the cached lines when the width or the theme they were drawn for changed."""
        width = self.scrollable_content_region.width
        if width != self._layout_width:
            self._layout_width = width
            self._layout = layout_columns(width, pass_at_k=self.pass_at_k)
            self._strips.clear()
            self._header = None
            self.virtual_size = Size(max(width, 0), len(self.rows) + 1)
        if self._restyled:
            self._restyled = False
            styles = (
                self.rich_style,
                self.get_component_rich_style("cursor-rows--header"),
                self.get_component_rich_style("compare-table--dim"),
                *(self.get_component_rich_style(tint) for tint in TINTS.values()),
            )
            if styles != self._cached_styles:
                self._cached_styles = styles
                self._strips.clear()
                self._header = None
            # Resolved once per theme, not per line: only their colours are laid on a row.
            self._dim = Style(color=styles[2].color)
            self._tints = {
                tint: Style(bgcolor=style.bgcolor)
                for tint, style in zip(TINTS.values(), styles[3:], strict=True)
            }
            cursor = self.get_component_rich_style("cursor-rows--cursor")
            self._cursor = Style(bgcolor=cursor.bgcolor)

    def render_line(self, y: int) -> Strip:
        self._check_cache()
        width, base = self.size.width, self.rich_style
        if y == 0:
            if self._header is None:
                style = base + self.get_component_rich_style("cursor-rows--header")
                titles = [Segment(cell(c.title, w, c.align), style) for c, w in self._layout]
                self._header = Strip(titles).crop_extend(0, width, style)
            return self._header
        index = int(self.scroll_offset.y) + y - 1
        if not 0 <= index < len(self.rows):
            return Strip.blank(width, base)
        strip = self._strips.get(index)
        if strip is None:
            strip = self._strips[index] = self._render_row(self.rows[index], base).crop_extend(
                0, width, base
            )
        if index == self.cursor:
            strip = overlay(strip, self._cursor)
        return strip

    def _render_row(self, row: RowComparison, base: Style) -> Strip:
        cells = row_cells(row)
        muted = row.content != "same"
        dim = self._dim
        segments: list[Segment] = []
        for column, width in self._layout:
            if column.key != "classes":
                segments.append(
                    Segment(cell(cells[column.key], width, column.align), dim if muted else None)
                )
                continue
            left = width
            for position, (text, style_name) in enumerate(class_cells(row)):
                shown = (", " if position else "") + text
                style = dim if muted else self._style(style_name)
                if len(shown) > left:
                    segments.append(Segment(shown[: max(left - 1, 0)] + "…"[:left], style))
                    break
                segments.append(Segment(shown, style))
                left -= len(shown)
        strip = Strip(segments).apply_style(base)
        tint = row_tint(row)
        if tint is not None:
            strip = overlay(strip, self._tints[tint])
        return strip
