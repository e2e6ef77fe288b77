"""The event log: server changes, cancels and their answers, errors, in arrival order."""

from __future__ import annotations

from textual.widgets import Log

from tui.widgets.format import one_line


class EventLog(Log):
    """A bounded log; lines are plain text (never markup)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(max_lines=2000, highlight=False, **kwargs)  # type: ignore[arg-type]

    def add(self, elapsed: float, message: str) -> None:
        self.write_line(f"{elapsed:8.1f}s  {one_line(message)}")
