"""`SpillFile`: bytes a long run keeps on disk instead of in memory, read back by key.

A finished rollout's result is shown only when someone opens its details, exports it or
attaches to the run, yet a run of a million items would keep a million of them: the board
writes each to a spill file as the rollout finishes and keeps the key, two numbers in one int.

The file is unlinked from the start (nothing is left behind, whatever ends the process) and
lives in the folder it is given, the run folder: the user's disk, never a tmpfs, where it would
be memory under another name. Nothing is synced: it outlives no process, and what a resume
reads is the journal.
"""

from __future__ import annotations

import logging
import os
import pickle
import tempfile
import weakref
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# A key is the offset shifted past the length's bits, plus the length.
_LENGTH_BITS = 32


class SpillFile:
    """Appends byte strings to an unlinked file in `folder`; `get` reads one back by the key
    `put` gave. Opened at the first `put`; closed when it is collected."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._fd: int | None = None
        self._end = 0
        self._failed = False

    def put(self, data: bytes) -> int | None:
        """Write `data`; its key, or None when it cannot be written (the caller keeps it: a
        run goes on with what it holds in memory; the first failure is logged)."""
        if len(data) >> _LENGTH_BITS:
            return None  # 4 GiB in one entry: kept where it is
        offset = self._end
        try:
            fd = self._open()
            written = 0
            while written < len(data):  # a short write goes on where it stopped
                written += os.pwrite(fd, data[written:], offset + written)
        except OSError as exc:
            if not self._failed:
                self._failed = True
                logger.warning(
                    "cannot write to a spill file in %s (%s): finished rollouts are kept in "
                    "memory from here on",
                    self.folder,
                    exc.strerror or exc,
                )
            return None
        self._end = offset + written
        return offset << _LENGTH_BITS | len(data)

    def get(self, key: int) -> bytes:
        """What `put` wrote under `key`."""
        if self._fd is None:
            raise KeyError(key)
        offset, length = key >> _LENGTH_BITS, key & ((1 << _LENGTH_BITS) - 1)
        data = os.pread(self._fd, length, offset)
        if len(data) != length:
            raise OSError(f"the spill file in {self.folder} lost {length - len(data)} bytes")
        return data

    def put_object(self, value: object) -> int | None:
        """`value` pickled, written as `put` writes bytes (the same key, or None)."""
        return self.put(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def get_object(self, key: int) -> Any:
        """What `put_object` wrote under `key`, unpickled: bytes this process wrote to its own
        unlinked file, nobody else's."""
        return pickle.loads(self.get(key))

    def _open(self) -> int:
        if self._fd is None:
            self._fd = _unlinked_file(self.folder)
            weakref.finalize(self, os.close, self._fd)
        return self._fd


def _unlinked_file(folder: Path) -> int:
    """A new file in `folder` that no name points to, open for reading and writing."""
    flag = getattr(os, "O_TMPFILE", 0)
    if flag:
        try:
            return os.open(folder, flag | os.O_RDWR, 0o600)
        except OSError:
            pass  # a file system without O_TMPFILE: a named file, unlinked at once
    fd, name = tempfile.mkstemp(dir=folder, prefix=".spill-")
    os.unlink(name)
    return fd


__all__ = ["SpillFile"]
