"""`--verbose`: the lines a run appends to its `logs.txt`, copied to a stream as they come."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TextIO

from core.eval.safe_text import replace_unsafe

POLL_SEC = 0.2


class LogFollower:
    """Follows `path` from its size now (a resumed run's older lines are not repeated).

    The log is read back rather than hooked: every line that reaches `logs.txt` (already
    redacted) reaches the stream, whoever wrote it, and a rollout server's output is escaped
    before it meets the terminal.
    """

    def __init__(self, path: Path, stream: TextIO) -> None:
        self.path = path
        self.stream = stream
        try:
            self._offset = path.stat().st_size
        except OSError:
            self._offset = 0
        self._partial = b""

    async def follow(self) -> None:
        """Copy new lines every `POLL_SEC` until cancelled."""
        while True:
            self.drain()
            await asyncio.sleep(POLL_SEC)

    def drain(self) -> None:
        """Copy the complete lines written since the last call."""
        try:
            with self.path.open("rb") as log:
                log.seek(self._offset)
                data = log.read()
        except OSError:
            return  # not created yet
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            text = replace_unsafe(line.decode("utf-8", "replace"))
            print(text, file=self.stream, flush=True)
