"""The rollout table's lines as strips: the header with the sort's marker, and a rollout's row.

A row's cells come from the columns (table_columns.py) with their style names, its phase
track glyph by glyph (phase_track.py), then its state's tint (row_states.py) and its mark
laid over it. The table (rollout_table.py) resolves the styles from its component classes
and the theme, and caches each line it is given here until its rollout changes.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from core.board import RolloutBoard
from core.eval.compare.baseline import Baseline
from core.rollout_record import RolloutRecord
from tui.widgets.phase_track import CONNECTOR, phase_cells
from tui.widgets.table.columns import PHASE_TRACK_WIDTH, Layout, cell, header_cells, row_cells
from tui.widgets.table.row_states import row_tint
from tui.widgets.table.sorting import Sort


def overlay(strip: Strip, style: Style) -> Strip:
    """`style` over every segment's own (`Strip.apply_style` applies it underneath, so a
    cell's background would hide the cursor's)."""
    return Strip(Segment.apply_style(strip, post_style=style), strip.cell_length)


def header_strip(
    layout: Layout, sort: Sort, *, style: Style, sorted_style: Style, width: int
) -> Strip:
    """The column titles, the sorted one in `sorted_style` with the sort's marker."""
    segments = [
        Segment(text, sorted_style if sorted_here else style)
        for text, sorted_here in header_cells(layout, sort.column, sort.marker)
    ]
    return Strip(segments).crop_extend(0, width, style)


def row_strip(
    record: RolloutRecord,
    board: RolloutBoard,
    now: float,
    layout: Layout,
    *,
    marked: bool,
    baseline: Baseline | None,
    base: Style,
    style: Callable[[str], Style],
    dim: Style,
    tint: Callable[[str], Style],
    marked_background: Style,
) -> Strip:
    """`record`'s row in `layout`, on `base`: `style` turns a cell's style name into a style,
    `dim` colours the muted columns, `tint` gives what a row tint (row_states.TINTS) lays
    over the row, and a marked row has `marked_background` over that; with a `baseline`, the
    base column's cell and the regressed rows' tint."""
    cells = row_cells(record, board, now, marked=marked, baseline=baseline)
    segments: list[Segment] = []
    for column, width in layout:
        if column.key == "phases":
            for position, (glyph, glyph_style) in enumerate(phase_cells(record)):
                if position:
                    segments.append(Segment(CONNECTOR[0], style(CONNECTOR[1])))
                segments.append(Segment(glyph, style(glyph_style)))
            segments.append(Segment(" " * (width - PHASE_TRACK_WIDTH)))
        else:
            text, style_name = cells[column.key]
            cell_style = dim if column.dim else style(style_name) if style_name else None
            segments.append(Segment(cell(text, width, column.align), cell_style))
    strip = Strip(segments).apply_style(base)
    row_state = row_tint(record, board, now, baseline)
    if row_state is not None:
        strip = overlay(strip, tint(row_state))
    if marked:
        strip = overlay(strip, marked_background)
    return strip
