"""The silence banner: while a `--server` run's servers send it no ownership events, what that
means for the phases shown and the exact settings that end it (`core.eval.event_silence`)."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from core.eval.event_silence import EventSilence
from tui.widgets.banner import Banner
from tui.widgets.format import plain


class SilenceBanner(Banner):
    """Hidden unless the source says its servers are silent; then three lines, the settings
    wrapped rather than cut (they are meant to be copied)."""

    _shown: EventSilence | None = None

    def show(self, silence: EventSilence | None) -> None:
        """Asked at every summary update; redrawn only when what it says changed."""
        if silence == self._shown:
            return
        self._shown = silence
        if silence is None:
            self.hide()
            return
        headline = Text("▲ ", "bold")
        headline.append_text(plain(silence.headline, "bold", wrap=True))
        self.update(
            Group(headline, plain(silence.settings, wrap=True), plain(silence.keeping, wrap=True))
        )
        self.add_class("-shown")
