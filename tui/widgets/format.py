"""Small, total formatting helpers for the dashboard (every value may be missing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text

from core.eval.gateway.payloads import message_text
from core.eval.safe_text import multi_line, replace_unsafe
from core.rollout_record import DISPLAY_STATUSES, NOT_ADMITTED
from core.transcript import content_text
from core.types import RolloutStatus

# ANSI names, so every theme (and NO_COLOR) reads them. Textual maps them through its ANSI
# theme, where magenta is the same red as failure: grading is bright yellow instead. Keyed by
# display status (a status enum looks up as its value).
STATUS_STYLES: dict[str, str] = {
    RolloutStatus.QUEUED: "blue",
    RolloutStatus.RUNNING: "cyan",
    RolloutStatus.GRADING: "bright_yellow",
    RolloutStatus.SUCCESS: "green",
    RolloutStatus.FAILURE: "red",
    RolloutStatus.CANCELLED: "yellow",
    NOT_ADMITTED: "red",
}
#: The statuses with a summary chip and a filter key of their own: a rollout never admitted
#: is counted apart, and shown with the failures.
CHIP_STATUSES = tuple(status for status in DISPLAY_STATUSES if status != NOT_ADMITTED)


def money(usd: float) -> str:
    """`$12.34`, `$0.0421`, `$0.000336`: cents once they matter, else enough decimals for
    the price of a few small calls to show."""
    if usd >= 1:
        return f"${usd:.2f}"
    return f"${usd:.4f}" if usd >= 0.01 else f"${usd:.6f}"


def reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


# The whitespace a terminal would act on: on one line each is a space (a cell keeps its width).
_AS_SPACE = str.maketrans(dict.fromkeys("\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", " "))


def one_line(text: str) -> str:
    """Untrusted text for one line (a cell, a log line): line breaks and tabs as spaces, any
    other character that may not reach a terminal as U+FFFD; the same length as `text`."""
    return replace_unsafe(text.translate(_AS_SPACE))


def message_shown(message: Mapping[str, Any]) -> str:
    """A chat message (or an OpenAI Agents SDK item) as the text to show: its content's text
    (`content_text`: never the SDK's JSON), else the names of the tools it calls. Still raw:
    show it through `plain`."""
    return content_text(message.get("content")) or message_text(message)


def plain(text: str, style: str = "", *, wrap: bool = False) -> Text:
    """Untrusted text (ids, labels, errors, prompts) as Rich Text: `[` is never markup and
    control characters cannot reach the terminal. One line (ellipsis) unless `wrap`, which
    keeps the text's own line breaks."""
    if wrap:
        return Text(multi_line(text), style=style, overflow="fold")
    return Text(one_line(text), style=style, no_wrap=True, overflow="ellipsis")


def status_text(status: str) -> Text:
    """A display status (an attached run's may be any text) in its style."""
    return plain(status.replace("_", " "), STATUS_STYLES.get(status, ""))
