"""`logs.txt` of an eval run (EVAL.md §6): `<ISO-8601 UTC> [source] message` lines.

Every line is redacted before it reaches the file.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from types import TracebackType

from core.eval.redact import Redactor
from core.eval.results.durable import open_append, write_all
from core.eval.results.records import iso_utc


class RunLog:
    """`logs.txt`: timestamped lines, every one redacted before it reaches the file.

    `handler()` gives a `logging.Handler` writing through this log, so library loggers and
    a launched server's output end up in the same place. Writes after `close` are dropped:
    a handler may outlive the run it was attached to.
    """

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self._fd: int | None = open_append(path)
        self._lock = threading.Lock()
        #: The first write failure (a full or read-only disk): later lines are dropped.
        self.error: OSError | None = None

    def write(self, message: str, *, source: str | None = None) -> None:
        """Append `message`, one timestamped line per line of it."""
        text = self.redactor.redact(message.rstrip("\r\n"))
        prefix = f"{iso_utc()} " + (f"[{source}] " if source else "")
        lines = (line.rstrip("\r") for line in text.split("\n"))
        data = "".join(f"{prefix}{line}\n" for line in lines).encode("utf-8", "replace")
        with self._lock:
            if self._fd is not None and self.error is None:
                try:
                    write_all(self._fd, data)
                except OSError as exc:
                    # A log that cannot be written must not end the run it describes.
                    self.error = exc

    def handler(self, level: int = logging.NOTSET) -> logging.Handler:
        return _RunLogHandler(self, level)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> RunLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _RunLogHandler(logging.Handler):
    def __init__(self, log: RunLog, level: int) -> None:
        super().__init__(level)
        self._log = log
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._log.write(self.format(record))
        except Exception:
            self.handleError(record)


__all__ = ["RunLog"]
