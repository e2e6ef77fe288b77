"""The part of a run's time the timeline shows, and its cursor: zoom, pan and moves, as plain
arithmetic (no Textual), so that the keys' meaning is tested without drawing anything.

The window is [t0, t1) in seconds since the run's start, cut into as many columns as the
picture is wide; the cursor is an instant, always inside the window (a move past an edge
pans the window with it). Fitted, the window holds the whole run, from its start to the
latest moment it knows of.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

#: The narrowest window: a tenth of a second in the whole width.
MIN_SPAN_SEC = 0.1
#: How much one zoom key narrows (or widens) the window.
ZOOM_FACTOR = 2.0
#: A big step of the cursor (shift+arrow) and a pan (ctrl+arrow), in widths of the window.
BIG_STEP = 0.1
PAN_STEP = 0.5


@dataclass(frozen=True)
class TimeWindow:
    t0: float = 0.0
    t1: float = 1.0
    cursor: float = 0.0
    #: True while the window holds the whole run: it grows with a live run.
    fitted: bool = True

    @property
    def span(self) -> float:
        return self.t1 - self.t0

    def fit(self, start: float, end: float) -> TimeWindow:
        """The whole run, [start, end], with the cursor kept (or put at the end) inside."""
        end = max(end, start + MIN_SPAN_SEC)
        # A sliver past the end, so that the last instant has a column of its own.
        t1 = end + (end - start) / 1000
        cursor = self.cursor if start <= self.cursor <= end else end
        return TimeWindow(start, t1, cursor, fitted=True)

    def column_of(self, t: float, columns: int) -> int | None:
        """The column `t` falls in; None outside the window."""
        if not self.t0 <= t < self.t1:
            return None
        return min(int((t - self.t0) / self.span * columns), columns - 1)

    def time_of(self, column: int, columns: int) -> float:
        """The start of `column`."""
        return self.t0 + column * self.span / columns

    def zoom(self, factor: float, bounds: tuple[float, float]) -> TimeWindow:
        """The window `factor` times narrower (>1) or wider (<1) around the cursor, within
        `bounds` (the run's start and end): wide enough to hold the run, it is fitted."""
        start, end = bounds
        span = max(self.span / factor, MIN_SPAN_SEC)
        if span >= (end - start) * 1.001:
            return self.fit(start, end)
        # The cursor keeps its place on the screen.
        share = (self.cursor - self.t0) / self.span if self.span else 0.5
        t0 = self.cursor - share * span
        return self._placed(t0, span, bounds, fitted=False)

    def pan(self, widths: float, bounds: tuple[float, float]) -> TimeWindow:
        """The window moved by `widths` of itself (negative: back), the cursor with it."""
        shift = widths * self.span
        moved = self._placed(self.t0 + shift, self.span, bounds, fitted=self.fitted)
        return replace(moved, cursor=min(max(self.cursor + shift, moved.t0), _last(moved)))

    def move(self, columns_moved: int, columns: int, bounds: tuple[float, float]) -> TimeWindow:
        """The cursor `columns_moved` columns on (a column's width each), onto a column's
        start, within the run; past an edge the window pans to keep it in."""
        start, end = bounds
        width = self.span / columns
        here = math.floor((self.cursor - self.t0) / width + 1e-9)
        cursor = self.t0 + (here + columns_moved) * width
        cursor = min(max(cursor, start), end)
        t0 = self.t0
        if cursor < t0:
            t0 = cursor
        elif cursor >= self.t1:
            t0 = cursor - self.span + width
        window = self._placed(t0, self.span, bounds, fitted=self.fitted and t0 == self.t0)
        return replace(window, cursor=cursor)

    def to_edge(self, last: bool, bounds: tuple[float, float]) -> TimeWindow:
        """The cursor at the run's start or end, the window panned to show it."""
        target = bounds[1] if last else bounds[0]
        t0 = self.t0 if self.t0 <= target < self.t1 else target - (self.span if last else 0)
        window = self._placed(t0, self.span, bounds, fitted=self.fitted)
        return replace(window, cursor=min(max(target, window.t0), _last(window)))

    def _placed(
        self, t0: float, span: float, bounds: tuple[float, float], *, fitted: bool
    ) -> TimeWindow:
        """[t0, t0 + span) slid to overlap the run as much as it can."""
        start, end = bounds
        t0 = min(t0, end - span * 0.999)
        t0 = max(t0, start) if span < end - start else start
        cursor = min(max(self.cursor, t0), t0 + span)
        return TimeWindow(t0, t0 + span, cursor, fitted=fitted)


def _last(window: TimeWindow) -> float:
    """The last instant a cursor can be at in `window` (just inside its end)."""
    return window.t1 - window.span * 1e-6
