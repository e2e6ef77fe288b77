"""Reading a file that someone else may have put in place (a results folder handed over, a
rollout server's live preview): regular files only, never through a symlink, never blocking,
and never more than a bound.

A path may name anything: a FIFO (a plain open would wait forever for a writer), `/dev/zero`
or a 1 GiB file (a whole read takes all memory), a symlink to either. `open_regular` opens
without following a symlink (`O_NOFOLLOW`) and without blocking (`O_NONBLOCK`, which makes the
open of a FIFO return at once), then refuses what `fstat` says is not a regular file; given
the folder the file lies `under` (a previews root), it follows no symlink below that folder
either. `read_document` reads a JSON document whole up to `limit` bytes, and refuses a longer
one; `read_lines` streams a JSON-lines file line by line, keeping at most `max_line` bytes of
each (a longer line is reported by its length, not kept), so a file of any size is read in
bounded memory. Each refusal is an `OSError` whose `strerror` says what was not read and why.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

#: A JSON document of a results folder (manifest.json, metrics.json). The largest we write is
#: a manifest selecting a million rows (`selected_source_rows`: some 8 MB).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
#: One line of a JSON-lines results file (events.jsonl, transitions.jsonl, calls.jsonl). Our
#: writers bound every text of a line; a line past this is no record of theirs.
MAX_LINE_BYTES = 1024 * 1024
_CHUNK = 64 * 1024

# Non-blocking, so that a FIFO's open returns at once (it is then refused by its type).
_FILE_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
)
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def open_regular(path: Path, *, under: Path | None = None) -> int:
    """A read-only descriptor on the regular file `path`; `OSError` (`FileNotFoundError` when
    it does not exist) when it is a symlink or not a regular file. The caller closes it.

    With `under` (a folder `path` lies in), no symlink is followed anywhere below `under`
    either: each folder on the way is opened from the one above it (`dir_fd`) without
    following a link, where `O_NOFOLLOW` alone covers only the last component.
    """
    if under is None:
        descriptor = _open_at(path, path, _FILE_FLAGS, None)
    else:
        descriptor = _open_below(path, under)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "no regular file")
            raise OSError(errno.EINVAL, f"{kind}, not a regular file: not read", str(path))
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _open_below(path: Path, under: Path) -> int:
    try:
        parts = path.relative_to(under).parts
    except ValueError:
        raise OSError(errno.EINVAL, f"not inside {under}: not read", str(path)) from None
    if not parts:
        raise OSError(errno.EISDIR, "the folder itself, not a file in it: not read", str(path))
    # The folder `under` itself may be reached through a link (it is the caller's to name).
    folder = os.open(under, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        reached = under
        for part in parts[:-1]:
            reached = reached / part
            inner = _open_at(part, reached, _FOLDER_FLAGS, folder)
            os.close(folder)
            folder = inner
        return _open_at(parts[-1], path, _FILE_FLAGS, folder)
    finally:
        os.close(folder)


def _open_at(name: str | Path, shown: Path, flags: int, folder: int | None) -> int:
    """`os.open(name, flags, dir_fd=folder)`, a symlink said as one (`shown` names it)."""
    try:
        return os.open(name, flags, dir_fd=folder)
    except OSError as exc:
        # O_NOFOLLOW's answer for a symlink is ELOOP; with O_DIRECTORY, Linux says ENOTDIR.
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(name, folder)):
            raise OSError(errno.ELOOP, "a symbolic link: not followed", str(shown)) from None
        raise


def _is_link(name: str | Path, folder: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def read_document(path: Path, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them: `OSError` as
    `open_regular`, and `EFBIG` for a longer file."""
    descriptor = open_regular(path)
    try:
        data = read_at_most(descriptor, limit + 1)
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes: not read", str(path))
    return data


def read_at_most(descriptor: int, limit: int) -> bytes:
    """At most `limit` bytes of `descriptor`, read until its end or the limit."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(descriptor, min(limit - size, _CHUNK * 16))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


class Line(NamedTuple):
    """One line of a file, as `read_lines` gives it (a tuple: a journal of a million lines
    makes a million of them)."""

    number: int
    """From 1."""
    start: int
    """The offset of its first byte in the file."""
    data: bytes | None
    """Its bytes without the newline; None when it is longer than the reader keeps."""
    length: int
    """Its length in bytes, without the newline."""
    ended: bool
    """Whether a newline ends it (only the file's last line may lack one)."""

    @property
    def end(self) -> int:
        """The offset just past it (past its newline, when it has one)."""
        return self.start + self.length + (1 if self.ended else 0)


def read_lines(path: Path, max_line: int = MAX_LINE_BYTES) -> Iterator[Line]:
    """The lines of the regular file `path`, streamed; `OSError` as `open_regular`, raised
    here rather than at the first line. A line longer than `max_line` bytes comes with no
    data (its bytes are read and let go)."""
    return _lines(open_regular(path), max_line)


def _lines(descriptor: int, max_line: int) -> Iterator[Line]:
    try:
        number, start, length = 1, 0, 0
        kept: list[bytes] = []
        while chunk := os.read(descriptor, _CHUNK):
            position = 0
            while True:
                newline = chunk.find(b"\n", position)
                piece = chunk[position : len(chunk) if newline < 0 else newline]
                length += len(piece)
                if length <= max_line:
                    kept.append(piece)
                else:
                    kept.clear()
                if newline < 0:
                    break
                yield Line(number, start, _kept(kept, length, max_line), length, ended=True)
                number, start, length = number + 1, start + length + 1, 0
                kept = []
                position = newline + 1
        if length:
            yield Line(number, start, _kept(kept, length, max_line), length, ended=False)
    finally:
        os.close(descriptor)


def _kept(kept: list[bytes], length: int, max_line: int) -> bytes | None:
    return b"".join(kept) if length <= max_line else None


__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_LINE_BYTES",
    "Line",
    "open_regular",
    "read_at_most",
    "read_document",
    "read_lines",
]
