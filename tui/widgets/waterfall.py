"""The waterfall of one rollout, drawn (the model is `core.eval.timing.waterfall`): a row per
segment on one time axis, fitted to the width it is given, bars drawn with eighth blocks so
that a span's end is placed to an eighth of a cell (its start to half a cell: the block
characters that fill a cell from the right are only ▕ and ▐).

The full view's Waterfall tab (`d`, then 5) draws it over the whole width; the details pane
draws it at its own width when that leaves the bars room (`fits`). Colours are the ANSI
names the rest of the dashboard uses (tui/widgets/format.py), which Textual maps through
each theme, light ones too.
"""

from __future__ import annotations

import math

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from core.eval.count_text import compact_count
from core.eval.duration_text import duration
from core.eval.timing.waterfall import Segment, Waterfall
from core.phases import SkipReason
from tui.widgets.blocks import eighths
from tui.widgets.format import STATUS_STYLES

#: The labels' column: as wide as the longest label, from `LABEL_WIDTH` to `MAX_LABEL`
#: (Harbor's `environment_setup` is 17).
LABEL_WIDTH = 10
MAX_LABEL = 18
#: The narrowest bar area drawn; below it the chart says it does not fit.
MIN_BARS = 12
DETAIL_WIDTH = 26
#: The narrowest the details column gets before it is left out.
MIN_DETAIL = 14

CLIENT_STYLE = "bright_black"
DIAGNOSTICS_STYLE = "bright_blue"
IDLE_STYLE = "dim"
WAITING_STYLE = "cyan"
#: Why a phase has no bar, short enough for the row (the details say it at length).
SKIPPED_WORDS: dict[SkipReason, str] = {
    "not_observed": "not observed: it happened between two polls",
    "not_requested": "not requested (grade=false)",
    "ended_early": "the rollout ended before it",
    "not_recorded": "not recorded by the run's files",
}
#: What a phase's source says of its start.
SOURCE_WORDS = {"server": "server (exact)", "poll": "poll (by then)", "model": "call (by then)"}


def span(seconds: float) -> str:
    """A span as the waterfall writes it: to the millisecond under a tenth of a second
    (admission and a reported queue are often that short), else as every duration is."""
    if 0 < seconds < 0.0995:
        return f"{max(1, round(seconds * 1000))}ms"
    return duration(seconds)


def fits(width: int) -> bool:
    """Whether a chart of `width` columns leaves the bars room."""
    return width - LABEL_WIDTH - 1 >= MIN_BARS


def label_width(model: Waterfall, width: int) -> int:
    """The labels' column: the longest label's, within its bounds and leaving the bars room."""
    longest = max((len(_describe(segment)[0]) for segment in model.segments), default=0)
    return max(LABEL_WIDTH, min(MAX_LABEL, longest, width - 1 - MIN_BARS))


def call_style(segment: Segment) -> str:
    if segment.open:
        return WAITING_STYLE
    if segment.status == 200:
        return "green"
    return "yellow" if segment.status is None else "red"


def bar_cells(start: float, end: float, width: int) -> dict[int, str]:
    """The characters of a bar from `start` to `end` (in cells, 0 to `width`): a full block
    where it covers a cell, a left-aligned eighth block where it ends inside one, ▐ or ▕
    where it starts inside one; at least one ▏ however short."""
    start = min(max(start, 0.0), float(width))
    end = min(max(end, start), float(width))
    first = min(math.floor(start), width - 1)
    if end - start < 1 / 8:
        return {first: "▕" if start - first >= 0.5 else "▏"}
    cells: dict[int, str] = {}
    for cell in range(first, min(math.ceil(end), width)):
        left, right = max(start, cell), min(end, cell + 1)
        if left > cell and right >= cell + 1:  # starts inside this cell, goes on past it
            offset = left - cell
            cells[cell] = "█" if offset < 0.25 else "▐" if offset < 0.75 else "▕"
        elif right < cell + 1:  # ends inside this cell
            cells[cell] = eighths(right - left)
        else:
            cells[cell] = "█"
    return cells


class WaterfallChart:
    """A rollout's waterfall as a Rich renderable, drawn at whatever width it is given."""

    def __init__(self, model: Waterfall) -> None:
        self.model = model

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from waterfall_lines(self.model, options.max_width)


def waterfall_lines(model: Waterfall, width: int) -> list[Text]:
    """The chart's lines at `width` columns: the axis, then a row per segment."""
    if not fits(width):
        return [Text("too narrow for the waterfall: widen the pane, or d for the full view", "dim")]
    labels = label_width(model, width)
    detail_width = min(DETAIL_WIDTH, width - labels - 1 - MIN_BARS - 1)
    if detail_width < MIN_DETAIL:
        detail_width = 0
    bars = width - labels - 1 - (detail_width + 1 if detail_width else 0)
    scale = bars / model.length
    lines = [summary_line(model), _axis(model.length, labels, bars)]
    unrecorded = [s.label for s in model.segments if s.skipped == "not_recorded"]
    if unrecorded:  # a run folder without a recording: one line says it for every phase
        lines.append(Text(f"{', '.join(unrecorded)}: {SKIPPED_WORDS['not_recorded']}", "dim"))
    for segment in model.segments:
        if segment.skipped != "not_recorded":
            lines.append(_row(segment, labels, bars, scale, detail_width))
    if model.calls_not_kept:
        lines.append(
            Text(f"  {model.calls_not_kept} earlier model calls not kept by the board", "dim")
        )
    return lines


def summary_line(model: Waterfall) -> Text:
    """The glance: how long in all, in each phase, waiting on the model, idle between the
    calls, and whose diagnostics the sub-phases are."""
    going_on = any(segment.open for segment in model.segments)
    parts = [f"{span(model.length)}{' so far' if going_on else ''}"]
    for segment in model.segments:
        if segment.kind == "admission":
            parts.append(f"admission {span(segment.seconds)}")
        elif segment.kind == "phase":
            parts.append(f"{segment.label} {span(segment.seconds)}")
    calls = [segment for segment in model.segments if segment.kind == "call"]
    if calls:
        model_time = sum(segment.seconds for segment in calls)
        count = f"{len(calls)} call" + ("s" if len(calls) != 1 else "")
        parts.append(f"model {span(model_time)} in {count}")
    idle = sum(segment.seconds for segment in model.segments if segment.kind == "idle")
    if idle:
        parts.append(f"idle {span(idle)}")
    if any(segment.kind == "sub_phase" for segment in model.segments):
        parts.append(f"sub-phases: {model.diagnostics_backend or 'the server'}'s diagnostics")
    return Text(" · ".join(parts), "bold")


def _axis(length: float, labels: int, bars: int) -> Text:
    """`0s` under the bars' start, the middle and the end's time under their end."""
    line = [" "] * bars
    for position, label in (
        (0, "0s"),
        (bars // 2 - 2, span(length / 2)),
        (bars - 5, span(length)),
    ):
        for offset, char in enumerate(label):
            if 0 <= position + offset < bars:
                line[position + offset] = char
    text = Text(" " * (labels + 1), no_wrap=True)
    text.append("".join(line), "dim")
    return text


def _row(segment: Segment, labels: int, bars: int, scale: float, detail_width: int) -> Text:
    label, style, detail = _describe(segment)
    text = Text(no_wrap=True, overflow="crop")
    text.append(f"{label[:labels]:<{labels}} ", style)
    area = [(" ", "")] * bars
    if segment.kind == "skipped":
        reason = SKIPPED_WORDS[segment.skipped] if segment.skipped else "not seen"
        room = bars + (detail_width + 1 if detail_width else 0)
        warn = segment.skipped == "not_observed"
        text.append(reason[:room], "yellow" if warn else "dim")
        return text
    start, end = segment.start * scale, segment.end * scale
    if segment.kind == "terminal":
        area[min(int(start), bars - 1)] = ("◆", style)
    elif segment.kind == "idle":
        for cell in range(min(int(start), bars - 1), min(math.ceil(end), bars)):
            area[cell] = ("·", IDLE_STYLE)
    else:
        for cell, char in bar_cells(start, end, bars).items():
            area[cell] = (char, style)
    for char, char_style in area:
        text.append(char, char_style)
    if detail_width:
        text.append(" ")
        text.append(detail[:detail_width], "dim" if segment.kind == "idle" else "")
    return text


def _describe(segment: Segment) -> tuple[str, str, str]:
    """(label, style, detail) of a row."""
    lasted = span(segment.seconds) + ("+" if segment.open else "")
    kind = segment.kind
    if kind == "admission":
        return "admission", CLIENT_STYLE, f"{lasted} client wait"
    if kind in ("phase", "skipped"):
        style = STATUS_STYLES.get(segment.label, "")
        if kind == "skipped":
            return segment.label, "dim", ""
        source = SOURCE_WORDS.get(segment.source or "", "")
        return segment.label, style, f"{lasted} {source}".rstrip()
    if kind == "call":
        if segment.open:
            status = "waiting"
        elif segment.status is None:
            status = "abandoned"
        else:
            status = str(segment.status)
        tokens = "" if segment.tokens is None else f" {compact_count(segment.tokens)} tok"
        return segment.label, call_style(segment), f"{lasted}{tokens} {status}"
    if kind == "idle":
        return "  idle", IDLE_STYLE, f"{lasted} idle"
    if kind == "terminal":
        return (
            segment.label,
            STATUS_STYLES.get(segment.label, "red"),
            f"at {span(segment.start)}",
        )
    label = "trial total" if segment.label == "trial" else segment.label
    return label, DIAGNOSTICS_STYLE, f"{lasted} diagnostics"
