"""Small, total formatting helpers for the dashboard (every value may be missing)."""

from __future__ import annotations

from rich.text import Text

# ANSI names, so every theme (and NO_COLOR) reads them. Textual maps them through its ANSI
# theme, where magenta is the same red as failure: grading is bright yellow instead.
STATUS_STYLES = {
    "queued": "blue",
    "running": "cyan",
    "grading": "bright_yellow",
    "success": "green",
    "failure": "red",
    "cancelled": "yellow",
    "not_admitted": "red",
}


def duration(seconds: float | None) -> str:
    """`0.4s`, `12s`, `3m05s`, `1h02m`: compact and monotone in width."""
    if seconds is None:
        return "-"
    seconds = max(seconds, 0.0)
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def printable(text: str) -> str:
    """Untrusted text with its control characters masked, so they cannot reach the terminal."""
    return "".join(ch if ch.isprintable() else "\ufffd" for ch in text)


def plain(text: str, style: str = "", *, wrap: bool = False) -> Text:
    """Untrusted text (ids, labels, errors, prompts) as Rich Text: `[` is never markup and
    control characters cannot reach the terminal. One line (ellipsis) unless `wrap`."""
    cleaned = printable(text)
    if wrap:
        return Text(cleaned, style=style, overflow="fold")
    return Text(cleaned, style=style, no_wrap=True, overflow="ellipsis")


def status_text(status: str) -> Text:
    return Text(status.replace("_", " "), style=STATUS_STYLES.get(status, ""))
