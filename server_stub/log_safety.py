"""What the rollout server logs, safe to keep and to read: keys masked, line breaks escaped.

A rollout's `llm_api_key` comes with its request, and a chat endpoint (a gateway) that refuses
it may quote it back: the workflow's exception, which the server logs, then holds it. A
rollout id is the client's own text, and one holding a line break would write lines of its
own into the log. `LOG_SAFETY`, a `logging.Filter` on every logger of server_stub
(`server_logger`), masks the keys it holds (the server's api key, and each rollout's
`llm_api_key` while its task runs) in a record's message and traceback, and escapes the
control and format characters of the message (a line break as the two characters `\\n`).

One for the process, as loggers are; keys are counted, so one shared by many rollouts stays
masked until the last of them ends. The eval's `Redactor` does more (generic credential
patterns), but server_stub imports nothing of the eval (DESIGN.md §1): this is its own,
small on purpose; how a key is spelled in text is the shared rule (`core.secret_forms`).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable

from core.secret_forms import MIN_SECRET_LENGTH, spellings

MASK = "***"


def escape_controls(text: str) -> str:
    """`text` with every character that is not printable (line breaks, ESC, bidi overrides)
    written as its Python escape (`\\n`, `\\x1b`, `\\u202e`), so one value is one line."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _nothing() -> None:
    return None


class LogSafety(logging.Filter):
    """Masks the keys it holds and escapes control characters in every record it sees."""

    def __init__(self) -> None:
        super().__init__()
        self._keys: Counter[str] = Counter()
        self._lock = threading.Lock()
        # The spellings to mask, longest first (a key holding another is masked whole);
        # rebuilt on the next record after a change, not on every admission.
        self._forms: tuple[str, ...] = ()
        self._stale = False

    def hold(self, key: str | None) -> Callable[[], None]:
        """Mask `key` until the returned function is called (calling it again does nothing)."""
        if key is None or len(key) < MIN_SECRET_LENGTH:
            return _nothing
        with self._lock:
            self._keys[key] += 1
            self._stale = True
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                self._keys[key] -= 1
                if self._keys[key] <= 0:
                    del self._keys[key]
                self._stale = True

        return release

    def mask(self, text: str) -> str:
        for form in self._current_forms():
            if form in text:
                text = text.replace(form, MASK)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True  # a record whose arguments do not fit: the handler reports it
        record.msg, record.args = escape_controls(self.mask(message)), None
        if record.exc_info and not record.exc_text:
            # Formatted here, once, so every handler writes the masked traceback.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.mask(record.exc_text)
        if record.stack_info:
            record.stack_info = self.mask(record.stack_info)
        return True

    def _current_forms(self) -> tuple[str, ...]:
        if self._stale:
            with self._lock:
                forms = set().union(*(spellings(key) for key in self._keys))
                self._forms = tuple(sorted(forms, key=lambda form: (-len(form), form)))
                self._stale = False
        return self._forms


LOG_SAFETY = LogSafety()


def server_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)`, its records passed through `LOG_SAFETY`."""
    logger = logging.getLogger(name)
    if LOG_SAFETY not in logger.filters:
        logger.addFilter(LOG_SAFETY)
    return logger


__all__ = ["LOG_SAFETY", "MASK", "LogSafety", "escape_controls", "server_logger"]
