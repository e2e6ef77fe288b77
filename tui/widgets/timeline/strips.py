"""The timeline's lines as strips: a run's time line (`core.eval.timeline.model`) over a window
(`window.TimeWindow`), one character a column, with eighth blocks for what falls between
two rows.

From the top: a title line (the window, the cursor's instant, how many were in flight then
and the limit); the band of rollouts in flight, a stepped area as tall as the rows allow,
against max-in-flight (a line); the time axis; one lane per server (its rollouts in flight,
its refusals `!`, its spans down `×` and draining `~`); the rail of finished rollouts,
coloured by outcome; the markers of what the user did and the stuck flags; a legend. Every
line starts with a label gutter; the plot's columns follow it. The cursor is not drawn here:
the pane lays it over the cached lines (`with_cursor`) and draws the title apart (`title`),
so a move redraws one line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from core.eval.duration_text import duration
from core.eval.timeline.labels import tick_step
from core.eval.timeline.model import NOT_ADMITTED, UNTRACKED, Marker, MarkerKind, RunTimeline
from core.types import RolloutStatus
from tui.widgets.timeline.window import TimeWindow

#: Eighths of a cell, bottom up: 0 (blank) to 8 (full).
EIGHTHS = " ▁▂▃▄▅▆▇█"
GUTTER = 10
#: The lines besides the band and the lanes: title, axis, rail, markers, legend.
FIXED_LINES = 5
MIN_BAND_ROWS = 2
MAX_BAND_ROWS = 12

# The marker glyph of each kind, and the order in which one column chooses among several.
MARKER_GLYPHS: dict[MarkerKind, str] = {
    MarkerKind.STUCK: "!",
    MarkerKind.PAUSE: "‖",
    MarkerKind.RESUME: "▸",
    MarkerKind.LIMIT: "↕",
    MarkerKind.REQUEUE: "↻",
    MarkerKind.CANCEL: "×",
    MarkerKind.MANUAL: "+",
    MarkerKind.UNTRACK: "⌀",
    MarkerKind.RESTART: "↺",
    MarkerKind.DRAIN: "⊖",
    MarkerKind.SESSION: "│",
}
_MARKER_RANK = {kind: rank for rank, kind in enumerate(MARKER_GLYPHS)}

#: Outcomes on the rail, worst first: a column shows the worst that ended in it.
RAIL_ORDER = (
    RolloutStatus.FAILURE.value,
    NOT_ADMITTED,
    RolloutStatus.CANCELLED.value,
    UNTRACKED,
    RolloutStatus.SUCCESS.value,
)

#: The component classes the pane styles each role of a cell with.
ROLES = (
    "band",
    "limit",
    "over-limit",
    "lane",
    "down",
    "draining",
    "refused",
    "failure",
    "cancelled",
    "success",
    "marker",
    "stuck",
    "label",
    "axis",
    "title",
)


@dataclass(frozen=True)
class Look:
    """What the lines are drawn with: the pane's base style and one style per role."""

    base: Style
    roles: dict[str, Style]

    def __call__(self, role: str) -> Style:
        return self.base + self.roles[role]


@dataclass(frozen=True)
class Picture:
    """The lines drawn, and where the plot's columns are in them."""

    lines: list[Strip]
    columns: int
    #: The lines the cursor is laid over (the band, the lanes, the rail, the markers).
    plotted: range


Cell = tuple[str, Style]


def band_rows(height: int, lanes: int) -> int:
    """How many rows the band gets in `height` lines with `lanes` lanes."""
    return max(MIN_BAND_ROWS, min(MAX_BAND_ROWS, height - FIXED_LINES - lanes))


def lanes_shown(height: int, lanes: int) -> int:
    """How many lanes fit beside a band of at least its smallest size."""
    return max(0, min(lanes, height - FIXED_LINES - MIN_BAND_ROWS))


def draw(
    timeline: RunTimeline,
    window: TimeWindow,
    *,
    width: int,
    height: int,
    look: Look,
    lane_name: Callable[[str], str],
) -> Picture:
    """Every line of the timeline at `width` × `height`."""
    columns = max(width - GUTTER, 1)
    t0, t1 = window.t0, window.t1
    lanes = timeline.lanes()
    shown = lanes_shown(height, len(lanes))
    rows = band_rows(height, shown)
    peaks = timeline.peaks(t0, t1, columns)
    limits = timeline.limit_columns(t0, t1, columns)
    scale = max([1, *peaks, *(limit or 0 for limit in limits)])
    lines = [Strip.blank(width)]  # the title's place: it follows the cursor (`title`)
    lines += _band(peaks, limits, scale=scale, rows=rows, look=look, width=width)
    lines.append(_axis(window, columns, look, width))
    for lane in lanes[:shown]:
        lines.append(
            _lane(
                timeline,
                window,
                lane,
                columns=columns,
                scale=scale,
                look=look,
                width=width,
                name=lane_name(lane),
            )
        )
    lines.append(_rail(timeline, window, columns, look, width))
    lines.append(_markers(timeline.markers_between(t0, t1), window, columns, look, width))
    lines.append(_legend(look, width))
    plotted = range(1, len(lines) - 1)
    return Picture(lines[:height], columns, plotted)


def _strip(label: str, cells: Sequence[Cell], look: Look, width: int) -> Strip:
    segments = [Segment(label[: GUTTER - 1].ljust(GUTTER), look("label"))]
    segments += (Segment(char, style) for char, style in cells)
    return Strip(Segment.simplify(segments)).crop_extend(0, width, look.base)


def _text_strip(text: str, style: Style, look: Look, width: int) -> Strip:
    return Strip([Segment(text[:width], style)]).crop_extend(0, width, look.base)


def title(timeline: RunTimeline, window: TimeWindow, look: Look, width: int) -> Strip:
    """The first line: where the cursor is and what was in flight then, and the window."""
    at = window.cursor
    limit = timeline.limit_at(at)
    parts = [
        f"at {duration(at)}: {timeline.count_at(at)} in flight"
        + ("" if limit is None else f" of {limit}"),
        f"showing {duration(window.t0)}–{duration(window.t1)}"
        + (" (all)" if window.fitted else ""),
    ]
    return _text_strip(" timeline · " + " · ".join(parts), look("title"), look, width)


def _band(
    peaks: list[int], limits: list[int | None], *, scale: int, rows: int, look: Look, width: int
) -> list[Strip]:
    """The stepped area of rollouts in flight, `rows` tall, with the limit's line."""
    eighths = rows * 8
    band, limit_style, over = look("band"), look("limit"), look("over-limit")
    lines = []
    for row in range(rows):
        floor = (rows - 1 - row) * 8  # eighths below this row
        cells: list[Cell] = []
        for peak, limit in zip(peaks, limits, strict=True):
            filled = min(max(round(peak / scale * eighths) - floor, 0), 8)
            if peak and not filled and row == rows - 1:
                filled = 1  # one rollout in flight shows, however tall the scale
            cell_limit = (
                limit is not None and floor <= math.ceil(limit / scale * eighths) - 1 < floor + 8
            )
            style = over if limit is not None and peak > limit else band
            if cell_limit:
                # The limit's line, or the band in the limit's colour where it reaches it.
                cells.append((EIGHTHS[filled] if filled else "─", limit_style))
            else:
                cells.append((EIGHTHS[filled], style))
        if row == 0:
            label = f"{scale:>8}"
        elif row == rows - 1:
            label = "in flight"
        else:
            label = ""
        lines.append(_strip(label, cells, look, width))
    return lines


def _axis(window: TimeWindow, columns: int, look: Look, width: int) -> Strip:
    """Ticks at round times, each labelled where its label fits."""
    step = tick_step(window.span, max(columns, 1) / 12)  # a tick every 12 columns or more
    chars = ["─"] * columns
    first = math.ceil(window.t0 / step)
    tick = first
    while (t := tick * step) < window.t1:
        column = window.column_of(t, columns)
        tick += 1
        if column is None:
            continue
        label = duration(t)
        chars[column] = "┬"
        if column + 1 + len(label) <= columns and all(
            c == "─" for c in chars[column + 1 : column + 2 + len(label)]
        ):
            chars[column + 1 : column + 1 + len(label)] = label
    style = look("axis")
    return _strip("", [(char, style) for char in chars], look, width)


def _lane(
    timeline: RunTimeline,
    window: TimeWindow,
    lane: str,
    *,
    columns: int,
    scale: int,
    look: Look,
    width: int,
    name: str,
) -> Strip:
    t0, t1 = window.t0, window.t1
    peaks = timeline.peaks(t0, t1, columns, lane=lane)
    refusals = timeline.refusal_columns(t0, t1, columns, lane)
    states = timeline.server_state_columns(t0, t1, columns, lane)
    cells: list[Cell] = []
    for peak, refused, state in zip(peaks, refusals, states, strict=True):
        filled = min(max(round(peak / scale * 8), 1 if peak else 0), 8)
        if refused:
            cells.append(("!", look("refused")))
        elif state == "down":
            cells.append((EIGHTHS[filled] if filled else "×", look("down")))
        elif state:
            cells.append((EIGHTHS[filled] if filled else "~", look("draining")))
        else:
            cells.append((EIGHTHS[filled], look("lane")))
    return _strip(name, cells, look, width)


def _rail(timeline: RunTimeline, window: TimeWindow, columns: int, look: Look, width: int) -> Strip:
    """Each column: how many finished in it (its height against the busiest column), in the
    colour of the worst outcome among them."""
    cells_counts = timeline.finished_columns(window.t0, window.t1, columns)
    busiest = max([1, *(sum(cell.values()) for cell in cells_counts)])
    cells: list[Cell] = []
    for counts in cells_counts:
        total = sum(counts.values())
        if not total:
            cells.append((" ", look.base))
            continue
        worst = next((o for o in RAIL_ORDER if counts.get(o)), RolloutStatus.SUCCESS.value)
        role = {NOT_ADMITTED: "failure", UNTRACKED: "cancelled"}.get(worst, worst)
        filled = max(1, round(total / busiest * 8))
        cells.append((EIGHTHS[filled], look(role)))
    return _strip("finished", cells, look, width)


def _markers(
    markers: list[Marker], window: TimeWindow, columns: int, look: Look, width: int
) -> Strip:
    chosen: dict[int, MarkerKind] = {}
    for marker in markers:
        column = window.column_of(marker.t, columns)
        if column is None:
            continue
        known = chosen.get(column)
        if known is None or _MARKER_RANK[marker.kind] < _MARKER_RANK[known]:
            chosen[column] = marker.kind
    cells: list[Cell] = []
    for column in range(columns):
        kind = chosen.get(column)
        if kind is None:
            cells.append((" ", look.base))
        else:
            role = "stuck" if kind is MarkerKind.STUCK else "marker"
            cells.append((MARKER_GLYPHS[kind], look(role)))
    return _strip("marks", cells, look, width)


LEGEND = (
    "─ max in flight  ! refused  × down  ~ draining  "
    "marks: ! stuck ‖ pause ▸ resume ↕ limit ↻ requeue × cancel + by hand ⌀ untrack ⊖ drain"
)


def _legend(look: Look, width: int) -> Strip:
    return _text_strip(" " + LEGEND, look("axis"), look, width)


def with_cursor(strip: Strip, column: int, style: Style) -> Strip:
    """`strip` with the cell at `column` (counted from the line's start) in `style` too."""
    before, cell, after = strip.divide([column, column + 1, strip.cell_length])
    return Strip.join([before, cell.apply_style(style), after])
