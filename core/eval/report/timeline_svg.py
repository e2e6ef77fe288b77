"""The run timeline as one inline SVG: the rollouts in flight against max-in-flight, a lane per
server, the rail of finished rollouts by outcome and the markers, over the whole run.

The run is cut into `COLUMNS` columns whatever its size, and every picture is drawn a column at
a time from `RunTimeline`'s per-column answers: the band and the limit are one path each, a
lane one path and a rectangle per state change, the rail at most one rectangle per outcome and
column, the markers one per column. A run of 100,000 rollouts is as many elements as one of
ten. Each rail rectangle carries its outcome and count (`data-outcome`, `data-count`) and a
tooltip (`<title>`), which a browser shows without any script.
"""

from __future__ import annotations

from collections import Counter

from core.eval.duration_text import duration
from core.eval.report.markup import number, text
from core.eval.timeline.labels import lane_label, tick_step
from core.eval.timeline.model import NOT_ADMITTED, UNTRACKED, MarkerKind, RunTimeline
from core.types import RolloutStatus

#: How many slices of the run each picture is drawn in.
COLUMNS = 240
#: The most server lanes drawn; the others are counted in a note.
MAX_LANES = 12
#: The shortest run drawn: a run of one instant still gets a time axis.
MIN_SPAN_SEC = 1.0

WIDTH = 1000.0
GUTTER = 118.0  # the labels' room, left of the plot
LABEL_CHARS = 18  # what fits in it
PLOT = WIDTH - GUTTER - 12.0
COLUMN = PLOT / COLUMNS
BAND = 150.0
AXIS = 22.0
LANE = 30.0
RAIL = 46.0
MARKS = 22.0

#: Outcomes on the rail, bottom up, with the words the legend gives them.
OUTCOMES: tuple[tuple[str, str], ...] = (
    (RolloutStatus.SUCCESS.value, "success"),
    (RolloutStatus.FAILURE.value, "failure"),
    (RolloutStatus.CANCELLED.value, "cancelled"),
    (NOT_ADMITTED, "not admitted"),
    (UNTRACKED, "untracked"),
)
#: Marker kinds, the one a column shows first (the same order as the dashboard's glyphs).
MARKER_ORDER = (
    MarkerKind.STUCK,
    MarkerKind.PAUSE,
    MarkerKind.RESUME,
    MarkerKind.LIMIT,
    MarkerKind.REQUEUE,
    MarkerKind.CANCEL,
    MarkerKind.MANUAL,
    MarkerKind.UNTRACK,
    MarkerKind.RESTART,
    MarkerKind.SESSION,
)


def window(timeline: RunTimeline) -> tuple[float, float]:
    """The whole run, [start, end], and a sliver past its end so that the last instant has a
    column of its own (as the dashboard fits its timeline)."""
    start = timeline.start
    end = max(timeline.end, start + MIN_SPAN_SEC)
    return start, end + (end - start) / 1000


def timeline_svg(timeline: RunTimeline) -> str:
    """The figure: the SVG, then its legend."""
    t0, t1 = window(timeline)
    peaks = timeline.peaks(t0, t1, COLUMNS)
    limits = timeline.limit_columns(t0, t1, COLUMNS)
    scale = max([1, *peaks, *(limit or 0 for limit in limits)])
    lanes = timeline.lanes()
    y = 8.0
    parts = [_band(peaks, limits, scale, y)]
    y += BAND
    parts.append(_axis(t0, t1, y))
    y += AXIS
    for lane in lanes[:MAX_LANES]:
        parts.append(_lane(timeline, lane, t0, t1, y))
        y += LANE
    parts.append(_rail(timeline, t0, t1, y))
    y += RAIL
    parts.append(_markers(timeline, t0, t1, y))
    y += MARKS
    svg = (
        f'<svg class="timeline" viewBox="0 0 {number(WIDTH)} {number(y + 4)}" role="img" '
        f'aria-label="run timeline" xmlns="http://www.w3.org/2000/svg">'
        f"<title>run timeline, {duration(t0)} to {duration(t1)}</title>" + "".join(parts) + "</svg>"
    )
    more = len(lanes) - MAX_LANES
    note = f'<p class="note">{more} more server lanes are not drawn.</p>' if more > 0 else ""
    return f'<figure id="timeline">{svg}{_legend()}{note}</figure>'


def _x(column: float) -> float:
    return GUTTER + column * COLUMN


def _label(y: float, words: str, css: str = "label") -> str:
    return f'<text class="{css}" x="{number(GUTTER - 8)}" y="{number(y)}">{text(words)}</text>'


def _stepped(values: list[float | None], top: float, height: float, scale: float) -> str:
    """A stepped line through each column's value (its top at `scale`), broken where a value
    is None: the path's data."""
    moves: list[str] = []
    drawing = False
    for column, value in enumerate(values):
        if value is None:
            drawing = False
            continue
        level = top + height - value / scale * height
        verb = "L" if drawing else "M"
        moves.append(f"{verb}{number(_x(column))} {number(level)}H{number(_x(column + 1))}")
        drawing = True
    return "".join(moves)


def _area(values: list[int], top: float, height: float, scale: float) -> str:
    """The stepped area under each column's value, down to the base: the path's data."""
    base = number(top + height)
    line = _stepped([float(value) for value in values], top, height, scale)
    return f"M{number(_x(0))} {base}{line.replace('M', 'L', 1)}L{number(_x(COLUMNS))} {base}Z"


def _band(peaks: list[int], limits: list[int | None], scale: int, top: float) -> str:
    """The most rollouts in flight in each column, and max-in-flight as it was set."""
    limit_line = _stepped([None if v is None else float(v) for v in limits], top, BAND, scale)
    peak = max(peaks)
    return (
        f'<g class="band" data-peak="{peak}" data-scale="{scale}">'
        f'<rect class="plot" x="{number(GUTTER)}" y="{number(top)}" width="{number(PLOT)}" '
        f'height="{number(BAND)}"/>'
        f'<path class="in-flight" d="{_area(peaks, top, BAND, scale)}">'
        f"<title>most rollouts in flight: {peak}</title></path>"
        + (
            f'<path class="limit" d="{limit_line}"><title>max-in-flight</title></path>'
            if limit_line
            else ""
        )
        + _label(top + 12, str(scale))
        + _label(top + BAND / 2 + 4, "in flight", "label strong")
        + _label(top + BAND, "0")
        + "</g>"
    )


def _axis(t0: float, t1: float, top: float) -> str:
    """Ticks at round times, a label under each."""
    step = tick_step(t1 - t0, PLOT / 90)  # a label every 90 units or more
    marks = [
        f'<line class="axis" x1="{number(GUTTER)}" y1="{number(top)}" '
        f'x2="{number(GUTTER + PLOT)}" y2="{number(top)}"/>'
    ]
    tick = int(t0 // step)
    while (t := tick * step) < t1:
        tick += 1
        if t < t0:
            continue
        x = GUTTER + (t - t0) / (t1 - t0) * PLOT
        marks.append(
            f'<line class="tick" x1="{number(x)}" y1="{number(top)}" x2="{number(x)}" '
            f'y2="{number(top + 5)}"/><text class="tick" x="{number(x)}" y="{number(top + 17)}">'
            f"{text(duration(t))}</text>"
        )
    return '<g class="axis">' + "".join(marks) + "</g>"


def _lane(timeline: RunTimeline, lane: str, t0: float, t1: float, top: float) -> str:
    """One server's rollouts in flight (scaled to its own peak), its spans down or draining,
    and its refusals."""
    peaks = timeline.peaks(t0, t1, COLUMNS, lane)
    peak = max(1, *peaks)
    inner = LANE - 8
    parts = [
        f'<g class="lane" data-lane="{text(lane)}">',
        f'<rect class="plot" x="{number(GUTTER)}" y="{number(top + 2)}" width="{number(PLOT)}" '
        f'height="{number(inner + 2)}"/>',
    ]
    states = timeline.server_state_columns(t0, t1, COLUMNS, lane)
    column = 0
    while column < COLUMNS:
        state = states[column]
        end = column
        while end < COLUMNS and states[end] == state:
            end += 1
        if state:
            parts.append(
                f'<rect class="state {text(state)}" x="{number(_x(column))}" '
                f'y="{number(top + 2)}" width="{number((end - column) * COLUMN)}" '
                f'height="{number(inner + 2)}"><title>{text(state)}</title></rect>'
            )
        column = end
    parts.append(
        f'<path class="lane-flight" d="{_area(peaks, top + 4, inner, peak)}">'
        f"<title>{text(lane or 'server')}: at most {max(peaks)} in flight</title></path>"
    )
    for column, refused in enumerate(timeline.refusal_columns(t0, t1, COLUMNS, lane)):
        if refused:
            parts.append(
                f'<rect class="refused" x="{number(_x(column))}" y="{number(top + 2)}" '
                f'width="{number(max(COLUMN, 2.0))}" height="6"><title>{refused} refused'
                "</title></rect>"
            )
    parts.append(_label(top + LANE / 2 + 4, lane_label(lane, LABEL_CHARS)))
    parts.append("</g>")
    return "".join(parts)


def _rail(timeline: RunTimeline, t0: float, t1: float, top: float) -> str:
    """The rollouts that left the flight in each column, stacked by outcome."""
    cells = timeline.finished_columns(t0, t1, COLUMNS)
    most = max([1, *(sum(cell.values()) for cell in cells)])
    width = t1 - t0
    inner = RAIL - 8
    parts = [
        '<g class="rail">',
        f'<rect class="plot" x="{number(GUTTER)}" y="{number(top + 2)}" width="{number(PLOT)}" '
        f'height="{number(inner + 2)}"/>',
        _label(top + RAIL / 2 + 4, "finished", "label strong"),
    ]
    known = {outcome for outcome, _words in OUTCOMES}
    for column, cell in enumerate(cells):
        base = top + 4 + inner
        begin = duration(t0 + column * width / COLUMNS)
        end = duration(t0 + (column + 1) * width / COLUMNS)
        outcomes = [*OUTCOMES, *((other, other) for other in sorted(cell) if other not in known)]
        for outcome, words in outcomes:
            count = cell.get(outcome, 0)
            if not count:
                continue
            height = count / most * inner
            base -= height
            parts.append(
                f'<rect class="outcome {text(outcome)}" data-outcome="{text(outcome)}" '
                f'data-count="{count}" x="{number(_x(column))}" y="{number(base)}" '
                f'width="{number(COLUMN)}" height="{number(height)}">'
                f"<title>{count} {text(words)}, {begin}–{end}</title></rect>"
            )
    parts.append("</g>")
    return "".join(parts)


def _markers(timeline: RunTimeline, t0: float, t1: float, top: float) -> str:
    """A mark per column that holds any: the first kind of `MARKER_ORDER` among them gives its
    colour, the tooltip counts them all."""
    width = (t1 - t0) / COLUMNS
    by_column: dict[int, Counter[MarkerKind]] = {}
    for marker in timeline.markers_between(t0, t1):
        column = min(int((marker.t - t0) / width), COLUMNS - 1)
        by_column.setdefault(column, Counter())[marker.kind] += 1
    parts = ['<g class="markers">', _label(top + 14, "markers")]
    for column, kinds in sorted(by_column.items()):
        first = min(kinds, key=MARKER_ORDER.index)
        x = _x(column) + COLUMN / 2
        said = ", ".join(f"{count} {kind.value}" for kind, count in kinds.most_common())
        parts.append(
            f'<path class="marker {first.value}" d="M{number(x)} {number(top + 4)}'
            f'l5 10h-10z"><title>{text(said)} at {duration(t0 + column * width)}</title></path>'
        )
    parts.append("</g>")
    return "".join(parts)


def _legend() -> str:
    swatches = [
        ("in-flight", "in flight"),
        ("limit", "max-in-flight"),
        *((f"outcome {outcome}", words) for outcome, words in OUTCOMES),
        ("state down", "server down"),
        ("state draining", "server draining"),
        ("refused", "refused"),
        ("marker stuck", "stuck flag"),
        ("marker other", "what the user did"),
    ]
    items = "".join(
        f'<li><span class="swatch {css}"></span>{text(words)}</li>' for css, words in swatches
    )
    return f'<ul class="legend">{items}</ul>'
