"""Playing a replay back: the keys that move the player (`,` a step back, `:` a time, `<` the
start, `>` the end), and what a move changes on the screen.

Going back plays the recording again from the start onto a new board (the source's `Player`), so
before each repaint `sync` hands a replaced board to the app (`FlowHost.use_board`), and
keeps the event log saying what the recording told of up to the replayed moment: cancels,
untracks, requeues, rollouts sent by hand, dispatch steered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.screens.seek import SeekScreen
from tui.sources.base import Player

if TYPE_CHECKING:
    from tui.flows.host import FlowHost


class PlaybackFlow:
    """The replay's player keys, and its board and notes kept on the screen."""

    def __init__(self, app: FlowHost) -> None:
        self.app = app
        self._notes_shown = 0

    @property
    def player(self) -> Player | None:
        return self.app.source.playback

    def sync(self) -> None:
        """Before a repaint: show the player's board if it replaced the one shown (it went
        back), and add what it played since to the event log (all of it, on a new board)."""
        player = self.player
        if player is None:
            return
        app = self.app
        if player.board is not app.board:
            app.use_board(player.board)
            app.event_log.clear()
            self._notes_shown = 0
        notes = player.notes
        for t, text in notes[self._notes_shown :]:
            app.event_log.add(t, text)
        self._notes_shown = len(notes)

    def step_back(self) -> None:
        """`,`: pause, and take back the last event played."""
        player = self.player
        if player is not None:
            player.step_back()
            self._moved()

    def to_start(self) -> None:
        """`<`: back to the start of the recording."""
        player = self.player
        if player is not None:
            player.rewind()
            self._moved()

    def to_end(self) -> None:
        """`>`: the recording played to its end."""
        player = self.player
        if player is not None:
            player.to_end()
            self._moved()

    def ask_time(self) -> None:
        """`:`: ask for a time, then jump there (nothing when the box is closed)."""
        player = self.player
        if player is None:
            return

        def chosen(seconds: float | None) -> None:
            if seconds is not None:
                player.seek(seconds)
                self._moved()

        self.app.push_screen(SeekScreen(player.length, player.played), chosen)

    def _moved(self) -> None:
        app = self.app
        app.repaint()
        app.table.tick()  # times in phase as of the new moment
        app.update_summary()
