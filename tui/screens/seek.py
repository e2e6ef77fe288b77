"""The replay's seek box (`:`): a time into the recording, typed as `90`, `1m30s` or `1:30`."""

from __future__ import annotations

import math
import re

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from core.eval.duration_text import duration
from tui.screens.dialogs import DIALOG_CSS

# `1h2m3.5s`, `2m`, `90s`, `90`: each unit at most once, in this order.
_UNITS = re.compile(
    r"(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s?)?"
)
# `1:30`, `1:02:03`, `0:05.5`: minutes and seconds, hours first when there are three.
_CLOCK = re.compile(r"\d+(?::\d+){1,2}(?:\.\d+)?")


def parse_time(text: str) -> float | None:
    """Seconds for `90`, `90s`, `1m30s`, `1h2m`, `1:30` or `1:02:03`; None for anything else
    (an empty text, a negative or a malformed time)."""
    text = text.strip().lower().replace(" ", "")
    if _CLOCK.fullmatch(text):
        seconds = 0.0
        for part in text.split(":"):
            seconds = seconds * 60 + float(part)
        return seconds
    match = _UNITS.fullmatch(text)
    if not text or match is None:
        return None
    seconds = float(match["h"] or 0) * 3600 + float(match["m"] or 0) * 60 + float(match["s"] or 0)
    return seconds if math.isfinite(seconds) else None


class SeekScreen(ModalScreen[float | None]):
    """Asks where to jump in the recording; dismissed with the seconds, or None (escape)."""

    DEFAULT_CSS = (
        DIALOG_CSS.format(name="SeekScreen")
        + """
    SeekScreen > Vertical { width: 52; }
    SeekScreen #seek-error { color: $error; height: auto; }
    """
    )
    BINDINGS = [
        Binding(
            "escape",
            "cancel",
            "Close",
            tooltip="Close, and stay where the replay is",
            id="seek.close",
        )
    ]

    def __init__(self, length: float, now: float) -> None:
        """`length`: the recording's, in seconds; `now`: where the replay is."""
        super().__init__()
        self.length = length
        self.now = now

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text("Jump to a time in the recording", "bold"))
            yield Static(
                Text(
                    f"from 0 to {duration(self.length)}; now at {duration(self.now)}. "
                    "Enter jumps, escape closes.",
                    "dim",
                )
            )
            yield Input(placeholder="90, 1m30s or 1:30", id="seek-time")
            yield Static("", id="seek-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        seconds = parse_time(event.value)
        if seconds is None:
            self.query_one("#seek-error", Static).update(
                Text(f"not a time: {event.value!r} (try 90, 1m30s or 1:30)")
            )
            return
        self.dismiss(min(seconds, self.length))

    def action_cancel(self) -> None:
        self.dismiss(None)
