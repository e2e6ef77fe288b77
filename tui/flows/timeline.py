"""The run timeline (`w`): opening and closing it, keeping it up with the run, and what its
cursor does to the table (it shows the rollouts in flight then) and, in a replay, to the
player (`enter` plays the recording to the cursor).

A live run's time line (also one attached to from another process) is followed from the
board shown (`core.eval.timeline.followed`) at every repaint, from the dashboard's start:
the rollouts' own times are the board's, but the limit, the pauses and the servers' states
are seen as they change, so they are on it from then on. A replay's is its whole
recording (`Player.timeline`), made once; its rollouts not played yet are not on the board,
so the table shows them once the player has reached the cursor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from core.eval.duration_text import duration
from core.eval.timeline.followed import BoardTimeline, ServerSeen
from tui.flows.host import FlowHost
from tui.widgets.table.view import RolloutPick

if TYPE_CHECKING:
    from tui.widgets.timeline.pane import TimelinePane


class TimelineHost(FlowHost, Protocol):
    """What the timeline's flow uses of the app besides a flow's usual members."""

    timeline_pane: TimelinePane
    in_flight_at: RolloutPick | None

    def now(self) -> float: ...


class TimelineFlow:
    """The timeline pane's life: open, followed, closed."""

    def __init__(self, app: TimelineHost) -> None:
        self.app = app
        self._follower: BoardTimeline | None = None

    @property
    def is_open(self) -> bool:
        return self.app.timeline_pane.has_class("-open")

    def toggle(self) -> None:
        """`w`: open the timeline (the cursor's keys go to it), or close it."""
        if self.is_open:
            self.close()
            return
        pane = self.app.timeline_pane
        pane.add_class("-open")
        pane.focus()
        self.update()
        pane.say_cursor(always=True)

    def close(self) -> None:
        """Close it: the table shows every rollout again and has the keys back."""
        app = self.app
        app.timeline_pane.remove_class("-open")
        app.in_flight_at = None
        app.table.focus()

    def update(self) -> None:
        """At every repaint: a live run's time line followed up to now (from the dashboard's
        start, so that what was steered before the timeline opened is on it), and shown
        while open (a replay's, its whole recording, does not change)."""
        app = self.app
        player = app.source.playback
        if player is not None:
            if self.is_open:
                app.timeline_pane.show_timeline(player.timeline)
            return
        follower = self._follower
        if follower is None or follower.board is not app.board:
            if follower is not None:
                follower.close()
            follower = self._follower = BoardTimeline(app.board)
        servers = [
            ServerSeen(server.url, server.state, server.restarts)
            for server in app.source.servers()
            # Not the start-up's steps, which stand in the header's place for the servers.
            if server.watched and not server.step
        ]
        timeline = follower.update(
            app.now(), dispatch=app.source.dispatch(), servers=servers, records=self.is_open
        )
        if self.is_open:
            app.timeline_pane.show_timeline(timeline)

    def cursor_moved(self, t: float, in_flight: frozenset[str]) -> None:
        """The table shows the rollouts in flight at the cursor."""
        self.app.in_flight_at = RolloutPick(f"in flight at {duration(t)}", in_flight)

    def seek(self, t: float) -> None:
        """A replay's `enter`: play the recording to the cursor (where the table's rows are
        then on the board)."""
        player = self.app.source.playback
        if player is not None:
            player.seek(t)
            self.app.repaint()
            self.app.table.tick()
            self.app.update_summary()
