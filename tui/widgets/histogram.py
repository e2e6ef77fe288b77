"""One distribution drawn as a histogram on the Line API: a line per bin (its range, a bar of
eighth blocks as long as its count, the count, and which percentiles fall in it), a cursor on
one bin. The bins are as many as the widget's height allows, recomputed when it is resized;
the numbers are `core.eval.timing.distributions`'.

Horizontal bars, so that a bin is a line the cursor moves over (↑ ↓) and a click lands on;
the colours are the theme's (component classes).
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from core.eval.timing.distributions import (
    Bin,
    Distribution,
    Metric,
    Sample,
    bin_label,
    distribution_of,
)
from tui.widgets.blocks import bar

#: The most bins drawn, however tall the widget.
MAX_BINS = 20
RANGE_WIDTH = 17
COUNT_WIDTH = 6
MARKS_WIDTH = 12
#: The longest bar: the counts stay near their bars on a wide terminal.
MAX_BAR = 60


class Histogram(Widget, can_focus=True):
    """The bins of one metric over the rollouts given, a line each, one under the cursor."""

    COMPONENT_CLASSES = {
        "histogram--bar",
        "histogram--cursor",
        "histogram--marker",
        "histogram--muted",
    }
    DEFAULT_CSS = """
    Histogram {
        height: 1fr;
        min-height: 4;
        background: $surface;
    }
    Histogram > .histogram--bar {
        color: $primary;
    }
    Histogram > .histogram--cursor {
        background: $primary 30%;
    }
    Histogram:focus > .histogram--cursor {
        background: $primary 55%;
    }
    Histogram > .histogram--marker {
        color: $warning;
        text-style: bold;
    }
    Histogram > .histogram--muted {
        color: $text-muted;
    }
    """

    class Changed(Message):
        """The bins were drawn anew, or the cursor is on another bin."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.metric: Metric | None = None
        self.samples: list[Sample] = []
        self.shown: Distribution | None = None
        self.cursor = 0
        self._lines: list[Strip] | None = None

    # -- data ------------------------------------------------------------------------------

    @property
    def bins(self) -> int:
        """As many bins as there are lines (and at most `MAX_BINS`)."""
        return max(1, min(MAX_BINS, self.size.height))

    def show(self, metric: Metric, samples: list[Sample]) -> None:
        """Draw `metric`'s `samples`; the cursor stays on its line where it still can."""
        self.metric, self.samples = metric, samples
        self._compute()

    def _compute(self) -> None:
        if self.metric is None:
            return
        self.shown = distribution_of(self.metric, self.samples, self.bins)
        self.cursor = min(self.cursor, max(len(self.shown.bins) - 1, 0))
        self._lines = None
        self.refresh()
        self.post_message(self.Changed())

    def on_resize(self, event: events.Resize) -> None:
        self._compute()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._lines = None  # another theme: other colours

    @property
    def selected(self) -> Bin | None:
        shown = self.shown
        if shown is None or not shown.bins:
            return None
        return shown.bins[self.cursor]

    def move(self, step: int) -> None:
        shown = self.shown
        if shown is None or not shown.bins:
            return
        cursor = min(max(self.cursor + step, 0), len(shown.bins) - 1)
        if cursor != self.cursor:
            self.cursor = cursor
            self._lines = None
            self.refresh()
            self.post_message(self.Changed())

    def on_click(self, event: events.Click) -> None:
        shown = self.shown
        if shown is not None and 0 <= event.y < len(shown.bins):
            self.move(event.y - self.cursor)

    # -- drawing -----------------------------------------------------------------------------

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return container.height

    def render_line(self, y: int) -> Strip:
        lines = self._lines
        if lines is None:
            lines = self._lines = self._draw(self.size.width)
        return lines[y] if y < len(lines) else Strip.blank(self.size.width, self.rich_style)

    def _draw(self, width: int) -> list[Strip]:
        shown, metric = self.shown, self.metric
        base = self.rich_style
        muted = base + self.get_component_rich_style("histogram--muted", partial=True)
        if shown is None or metric is None or not shown.bins:
            text = "no values among the rollouts shown (yet)"
            return [Strip([Segment(text[:width], muted)]).extend_cell_length(width, base)]
        bar_style = base + self.get_component_rich_style("histogram--bar", partial=True)
        marker = base + self.get_component_rich_style("histogram--marker", partial=True)
        cursor = self.get_component_rich_style("histogram--cursor", partial=True)
        bars = min(MAX_BAR, max(1, width - RANGE_WIDTH - COUNT_WIDTH - MARKS_WIDTH - 2))
        most = max(found.count for found in shown.bins) or 1
        lines: list[Strip] = []
        for index, found in enumerate(shown.bins):
            marks = " ".join(
                f"p{q}" for q, value in shown.percentiles if shown.bin_of(value) == index
            )
            drawn = bar(found.count / most * bars) if found.count else ""
            cells = [
                (f"{bin_label(metric, found):>{RANGE_WIDTH}} ", muted),
                (f"{drawn:<{bars}}", bar_style),
                (f"{found.count:>{COUNT_WIDTH}} ", base),
                (f"{marks:<{MARKS_WIDTH}}", marker),
            ]
            under = cursor if index == self.cursor else Style()
            segments = [Segment(text, style + under) for text, style in cells]
            strip = Strip(segments).crop(0, width).extend_cell_length(width, base)
            lines.append(strip)
        return lines


__all__ = ["MAX_BINS", "Histogram"]
