"""`logs.txt` of an eval run (EVAL.md §8), in the official line format.

`<UTC ISO-8601, microseconds, Z> <LEVEL> [<step>] <message>[ <details>]`, e.g.
`2026-12-01T08:47:01.513075Z INFO [dispatch] dispatching rollout {"rollout_id":"…","row_index":0}`:
LEVEL is `INFO`, `WARNING` or `ERROR` (a library logger's `DEBUG` or `CRITICAL` as it says),
`step` says which part of the run speaks (`run`, `resume`, `dispatch`, `result`, `cancel`,
`rollout-server` for the launched server's output, a logger's name for library records), and
`details`, only when there are some, are canonical JSON (sorted keys, no spaces, nulls kept).
A message of several lines becomes one such line per line.

Every line is redacted before it reaches the file, which is created 0600 and appended to by
every invocation of the run, as official. `read_log` reads the lines back (a replay of a run
folder without `transitions.jsonl` takes its times from them).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from core.eval.redact import Redactor
from core.eval.results.durable import AppendFile, canonical_json, open_append, write_all
from core.eval.results.records import iso_utc
from core.eval.untrusted_json import load_json
from core.regular_file import read_lines

DEFAULT_STEP = "run"
_LINE = re.compile(r"(?P<stamp>\S+) (?P<level>[A-Z]+) \[(?P<step>[^\]]*)\] (?P<text>.*)")


def log_line(
    message: str,
    *,
    step: str = DEFAULT_STEP,
    level: str = "INFO",
    details: Mapping[str, Any] | None = None,
    stamp: str | None = None,
) -> str:
    """The `logs.txt` lines for `message`, unredacted, newline-terminated."""
    prefix = f"{stamp or iso_utc()} {level.upper()} [{step}] "
    suffix = f" {canonical_json(dict(details))}" if details else ""
    lines = [line.rstrip("\r") for line in message.rstrip("\r\n").split("\n")]
    lines[-1] += suffix
    return "".join(f"{prefix}{line}\n" for line in lines)


class RunLog(AppendFile):
    """`logs.txt`: official-format lines, every one redacted before it reaches the file.

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

    def write(
        self,
        message: str,
        *,
        step: str = DEFAULT_STEP,
        level: str = "INFO",
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Append `message` (one line per line of it) said by `step` at `level`."""
        text = self.redactor.redact(log_line(message, step=step, level=level, details=details))
        data = text.encode("utf-8", "replace")
        with self._lock:
            if self._fd is not None and self.error is None:
                try:
                    write_all(self._fd, data)
                except OSError as exc:
                    # A log that cannot be written must not end the run it describes.
                    self.error = exc

    def handler(self, level: int = logging.NOTSET) -> logging.Handler:
        return _RunLogHandler(self, level)


@dataclass(frozen=True)
class LogLine:
    """One line of `logs.txt` as read back."""

    at: datetime
    """Its UTC time stamp."""
    level: str
    step: str
    text: str
    """The message and, when it has them, its details."""

    def details(self, message: str) -> dict[str, Any] | None:
        """The details of a line saying `message`: its JSON object; None when the line says
        something else, or has no details that parse."""
        if not self.text.startswith(message + " {"):
            return None
        try:
            details = load_json(self.text[len(message) + 1 :])
        except ValueError:
            return None
        return details if isinstance(details, dict) else None


def read_log(path: Path) -> Iterator[LogLine]:
    """The lines of a `logs.txt` (ours or the official tool's) in file order, streamed as
    `core.regular_file.read_lines` streams (`OSError` for a FIFO, a symlink); lines of another
    shape (a torn last line, text from before the format, a line past `MAX_LINE_BYTES`) are
    passed over."""
    for line in read_lines(path):
        if line.data is None:  # longer than MAX_LINE_BYTES: no line we write
            continue
        match = _LINE.fullmatch(line.data.decode("utf-8", "replace").rstrip("\r"))
        if match is None:
            continue
        try:
            at = datetime.fromisoformat(match["stamp"].replace("Z", "+00:00"))
        except ValueError:
            continue
        yield LogLine(at, match["level"], match["step"], match["text"])


class _RunLogHandler(logging.Handler):
    def __init__(self, log: RunLog, level: int) -> None:
        super().__init__(level)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._log.write(self.format(record), step=record.name, level=record.levelname)
        except Exception:
            self.handleError(record)


__all__ = ["DEFAULT_STEP", "LogLine", "RunLog", "log_line", "read_log"]
