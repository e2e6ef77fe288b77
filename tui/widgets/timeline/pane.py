"""`TimelinePane`: the run timeline over the rollout table (`w`), drawn on the Line API.

The pane draws whatever `RunTimeline` it is shown (`show_timeline`): a live run's, followed
from its board at each repaint, or a replay's whole recording. Its lines are drawn once per
change of the time line, the window, the size or the theme, and kept; the cursor is laid
over the kept lines, so moving it redraws nothing. Each move of the cursor says where it is
and which rollouts were in flight then (`CursorMoved`): the app filters the table to them.
In a replay, `enter` asks to play the recording to the cursor (`SeekAsked`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from rich.style import Style
from textual.binding import Binding
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from core.eval.timeline import labels
from core.eval.timeline.model import RunTimeline
from tui.widgets.timeline.strips import GUTTER, ROLES, Look, Picture, draw, title, with_cursor
from tui.widgets.timeline.window import BIG_STEP, PAN_STEP, ZOOM_FACTOR, TimeWindow

_ROLE_CSS = {
    "band": "color: $primary;",
    "limit": "color: $warning; text-style: bold;",
    "over-limit": "color: $warning;",
    "lane": "color: $secondary;",
    "down": "color: $error; background: $error 20%;",
    "draining": "color: $warning; background: $warning 15%;",
    "refused": "color: $error; text-style: bold;",
    "failure": "color: $error;",
    "cancelled": "color: $warning;",
    "success": "color: $success;",
    "marker": "color: $accent; text-style: bold;",
    "stuck": "color: $error; text-style: bold;",
    "label": "color: $text-muted;",
    "axis": "color: $text-muted;",
    "title": "text-style: bold;",
}


def lane_label(lane: str) -> str:
    """A server's lane as its label fits the gutter."""
    return labels.lane_label(lane, GUTTER - 1)


class TimelinePane(Widget, can_focus=True):
    """The run on a time axis, with a cursor in time."""

    COMPONENT_CLASSES = {f"timeline--{role}" for role in ROLES} | {"timeline--cursor"}

    DEFAULT_CSS = """
    TimelinePane {
        height: 40%;
        min-height: 10;
        max-height: 20;
        background: $surface;
        display: none;
    }
    TimelinePane.-open {
        display: block;
    }
    TimelinePane > .timeline--cursor {
        background: $accent 35%;
    }
    TimelinePane:focus > .timeline--cursor {
        background: $accent 65%;
    }
    """ + "".join(
        f"TimelinePane > .timeline--{role} {{ {css} }}\n" for role, css in _ROLE_CSS.items()
    )

    BINDINGS = [
        Binding(
            "left",
            "move(-1)",
            "Earlier",
            tooltip="The cursor a column earlier",
            show=False,
            id="timeline.left",
        ),
        Binding(
            "right",
            "move(1)",
            "Later",
            tooltip="The cursor a column later",
            show=False,
            id="timeline.right",
        ),
        Binding(
            "shift+left",
            "big_move(-1)",
            "Much earlier",
            tooltip="The cursor a tenth of the window earlier",
            show=False,
            id="timeline.big-left",
        ),
        Binding(
            "shift+right",
            "big_move(1)",
            "Much later",
            tooltip="The cursor a tenth of the window later",
            show=False,
            id="timeline.big-right",
        ),
        Binding(
            "ctrl+left",
            "pan(-1)",
            "Pan back",
            tooltip="Half a window back in time",
            show=False,
            id="timeline.pan-left",
        ),
        Binding(
            "ctrl+right",
            "pan(1)",
            "Pan on",
            tooltip="Half a window on in time",
            show=False,
            id="timeline.pan-right",
        ),
        Binding(
            "i",
            "zoom(1)",
            "Zoom in",
            tooltip="Half the time in the width, around the cursor",
            id="timeline.zoom-in",
        ),
        Binding(
            "o",
            "zoom(-1)",
            "Zoom out",
            tooltip="Twice the time in the width",
            id="timeline.zoom-out",
        ),
        Binding("z", "fit", "Fit", tooltip="The whole run in the width", id="timeline.fit"),
        Binding(
            "home",
            "edge(0)",
            "Start",
            tooltip="The cursor at the run's start",
            show=False,
            id="timeline.start",
        ),
        Binding(
            "end",
            "edge(1)",
            "End",
            tooltip="The cursor at the latest moment",
            show=False,
            id="timeline.end",
        ),
        Binding(
            "enter",
            "seek",
            "Seek here",
            tooltip="Replay: play the recording to the cursor",
            id="timeline.seek",
        ),
        Binding(
            "escape,w",
            "close",
            "Close",
            tooltip="Close the timeline (the table shows every rollout again)",
            id="timeline.close",
        ),
    ]

    class CursorMoved(Message):
        """The cursor is at `t`, when `in_flight` were in flight."""

        def __init__(self, t: float, in_flight: frozenset[str]) -> None:
            super().__init__()
            self.t = t
            self.in_flight = in_flight

    class SeekAsked(Message):
        """Play the recording to `t` (a replay's `enter`)."""

        def __init__(self, t: float) -> None:
            super().__init__()
            self.t = t

    class Closed(Message):
        """The pane was closed from its own keys."""

    def __init__(
        self,
        *,
        lane_name: Callable[[str], str] = lane_label,
        can_seek: Callable[[], bool] = lambda: False,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.timeline = RunTimeline()
        #: Where the cursor is, and the part of the run shown: at first the whole run, the
        #: cursor at its latest moment.
        self.window = TimeWindow(cursor=float("inf"))
        self._lane_name = lane_name
        self._can_seek = can_seek
        self._picture: Picture | None = None
        self._drawn: tuple[object, ...] = ()
        self._cursor_said: tuple[float, int] | None = None
        self._said_at: float | None = None
        self._said_in_flight: frozenset[str] = frozenset()

    # -- what it shows ---------------------------------------------------------------------

    @property
    def bounds(self) -> tuple[float, float]:
        return self.timeline.start, max(self.timeline.end, self.timeline.start + 0.1)

    def show_timeline(self, timeline: RunTimeline) -> None:
        """Draw `timeline` (the same one again after it changed, or another); a fitted window
        grows with it."""
        window = self.window
        # A cursor at the latest moment stays there as a live run goes on.
        at_end = window.cursor >= self.bounds[1]
        self.timeline = timeline
        if at_end:
            window = replace(window, cursor=float("inf"))
        if window.fitted:
            window = window.fit(*self.bounds)
        elif at_end:
            window = window.to_edge(True, self.bounds)
        self.window = window
        self.refresh()
        self.say_cursor()

    def say_cursor(self, *, always: bool = False) -> None:
        """Tell where the cursor is and who was in flight then, when either changed (or
        `always`: the pane was opened again, and the table shows every rollout)."""
        t = self.window.cursor
        said = (t, self.timeline.version)
        if not always and said == self._cursor_said:
            return
        self._cursor_said = said
        in_flight = frozenset(self.timeline.in_flight_at(t))
        # A live run's time line changes at every repaint: the table is filtered again only
        # when the cursor moved or its rollouts changed.
        if always or t != self._said_at or in_flight != self._said_in_flight:
            self._said_at, self._said_in_flight = t, in_flight
            self.post_message(self.CursorMoved(t, in_flight))

    def _set_window(self, window: TimeWindow) -> None:
        self.window = window
        self.refresh()
        self.say_cursor()

    # -- keys ------------------------------------------------------------------------------

    @property
    def columns(self) -> int:
        return max(self.size.width - GUTTER, 1)

    def action_move(self, step: int) -> None:
        self._set_window(self.window.move(step, self.columns, self.bounds))

    def action_big_move(self, direction: int) -> None:
        step = max(1, round(self.columns * BIG_STEP))
        self._set_window(self.window.move(direction * step, self.columns, self.bounds))

    def action_pan(self, direction: int) -> None:
        self._set_window(self.window.pan(direction * PAN_STEP, self.bounds))

    def action_zoom(self, direction: int) -> None:
        factor = ZOOM_FACTOR if direction > 0 else 1 / ZOOM_FACTOR
        self._set_window(self.window.zoom(factor, self.bounds))

    def action_fit(self) -> None:
        self._set_window(self.window.fit(*self.bounds))

    def action_edge(self, last: int) -> None:
        self._set_window(self.window.to_edge(bool(last), self.bounds))

    def action_seek(self) -> None:
        self.post_message(self.SeekAsked(self.window.cursor))

    def action_close(self) -> None:
        self.post_message(self.Closed())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "seek":
            return self._can_seek()
        return True

    # -- drawing ---------------------------------------------------------------------------

    def _look(self) -> Look:
        return Look(
            self.rich_style,
            {role: self.get_component_rich_style(f"timeline--{role}") for role in ROLES},
        )

    def _current_picture(self) -> Picture:
        look = self._look()
        window = self.window
        key = (
            id(self.timeline),
            self.timeline.version,
            window.t0,
            window.t1,
            window.fitted,
            self.size,
            look,
        )
        if self._picture is None or key != self._drawn:
            self._drawn = key
            self._picture = draw(
                self.timeline,
                window,
                width=self.size.width,
                height=self.size.height,
                look=look,
                lane_name=self._lane_name,
            )
        return self._picture

    def render_line(self, y: int) -> Strip:
        picture = self._current_picture()
        if y >= len(picture.lines):
            return Strip.blank(self.size.width, self.rich_style)
        if y == 0:
            return title(self.timeline, self.window, self._look(), self.size.width)
        strip = picture.lines[y]
        if y in picture.plotted:
            column = self.window.column_of(self.window.cursor, picture.columns)
            if column is not None:
                cursor = Style(bgcolor=self.get_component_rich_style("timeline--cursor").bgcolor)
                strip = with_cursor(strip, GUTTER + column, cursor)
        return strip
