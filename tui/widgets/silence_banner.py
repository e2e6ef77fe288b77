"""The silence banner: while a `--server` run's servers send it no ownership events, what that
means for the phases shown and the exact settings that end it (`core.eval.event_silence`)."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from core.eval.event_silence import EventSilence
from tui.widgets.format import plain


class SilenceBanner(Static):
    """Hidden unless the source says its servers are silent; then three lines, the settings
    wrapped rather than cut (they are meant to be copied)."""

    DEFAULT_CSS = """
    SilenceBanner {
        display: none;
        height: auto;
        max-height: 8;
        padding: 0 1;
        background: $warning-muted;
        color: $text;
    }
    SilenceBanner.-shown {
        display: block;
    }
    """

    _shown: EventSilence | None = None

    def show(self, silence: EventSilence | None) -> None:
        """Asked at every summary update; redrawn only when what it says changed."""
        if silence == self._shown:
            return
        self._shown = silence
        if silence is None:
            self.remove_class("-shown")
            return
        headline = Text("▲ ", "bold")
        headline.append_text(plain(silence.headline, "bold", wrap=True))
        self.update(
            Group(headline, plain(silence.settings, wrap=True), plain(silence.keeping, wrap=True))
        )
        self.add_class("-shown")
