"""`t`: the selected rollout's transcript, over the whole dashboard, following it as it runs
(the panel, widgets/transcript_panel.py, says where it comes from)."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Footer

from core.rollout_record import RolloutRecord
from tui.sources.base import DashboardSource
from tui.widgets.transcript import TranscriptView
from tui.widgets.transcript_panel import TranscriptPanel


class TranscriptScreen(ModalScreen[None]):
    """One rollout's conversation; modal, so that the dashboard's keys wait behind it."""

    DEFAULT_CSS = """
    TranscriptScreen {
        background: $background;
    }
    """
    BINDINGS = [
        Binding(
            "escape,t,q", "close", "Close", tooltip="Back to the dashboard", id="transcript.close"
        ),
    ]

    def __init__(
        self,
        source: DashboardSource,
        record: RolloutRecord,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """`wall_clock` tells the preview's age (its `updated_at` is the server's wall clock)."""
        super().__init__()
        self.source = source
        self.record = record
        self.wall_clock = wall_clock

    def compose(self) -> ComposeResult:
        yield TranscriptPanel(self.source, self.record, wall_clock=self.wall_clock)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(TranscriptView).focus()

    def action_close(self) -> None:
        self.dismiss(None)
