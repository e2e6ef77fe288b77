"""A server's repeated warnings, paced: the first of each kind is said, then at most one a minute.

uvicorn warns once per bad request ("Invalid HTTP request received.", a refused head, a closed
connection over the limit). Our listeners are on loopback, but any local process can reach
them: 600 bad requests printed 600 lines on a headless eval's stderr, burying its progress,
and as many in a dashboard run's `logs.txt`. One line says what happens; the pace keeps saying
it while it goes on, with how many alike were left out, so a flood stays visible without
drowning the rest.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable

# uvicorn's own logger for everything but access lines; every server we run logs through it.
SERVER_LOGGER = "uvicorn.error"
# How long after a warning another of the same text stays unsaid (only counted).
WINDOW_SEC = 60.0
# The distinct warning texts remembered: uvicorn's are a handful of fixed sentences; a text that
# varies (an exception's message) must not make the memory grow with it.
MAX_KINDS = 64


class _Kind:
    __slots__ = ("left_out", "said_at")

    def __init__(self, said_at: float) -> None:
        self.said_at = said_at
        self.left_out = 0


class WarningPace(logging.Filter):
    """Lets a warning through when its text was not said in the last `window_sec`; the one
    let through after a quiet spell says how many alike were left out before it."""

    def __init__(
        self, window_sec: float = WINDOW_SEC, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._window = window_sec
        self._clock = clock
        self._kinds: OrderedDict[str, _Kind] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True  # errors and tracebacks are each their own news
        text = record.getMessage()
        now = self._clock()
        kind = self._kinds.get(text)
        if kind is not None and now - kind.said_at < self._window:
            kind.left_out += 1
            return False
        if kind is not None and kind.left_out:
            record.msg = f"{text} ({kind.left_out} more alike since the last one shown)"
            record.args = None
        self._kinds[text] = _Kind(now)
        self._kinds.move_to_end(text)
        while len(self._kinds) > MAX_KINDS:
            self._kinds.popitem(last=False)
        return True


def pace_server_warnings() -> None:
    """Put the pace on the servers' logger, once per process (the logger is the process's)."""
    logger = logging.getLogger(SERVER_LOGGER)
    if not any(isinstance(existing, WarningPace) for existing in logger.filters):
        logger.addFilter(WarningPace())
