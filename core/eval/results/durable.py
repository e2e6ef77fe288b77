"""The small durable-write helpers every file of the results folder shares, and the eval side's
one way to replace a file (the results' snapshots, the demo's dataset, the dashboard's settings).

Every file is created with mode 0600 and the run folder with 0700. A replaced file is written
whole or not at all (`write_bytes_atomic`: a unique temporary file, fsync'd, then renamed over
the target); a create or rename is fsync'd into its folder, so what a run reports written
survives a crash. The rollout server has its own, unsynced policy (`server_stub.atomic_file`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

FILE_MODE = 0o600
FOLDER_MODE = 0o700

# Receives one human-readable warning (a skipped or dropped journal line, a repair).
WarningSink = Callable[[str], None]


def fsync_dir(folder: Path) -> None:
    """Make a create/rename inside `folder` survive a power loss (where the OS allows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # e.g. Windows cannot open a directory; the rename is still atomic
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF, errno.EACCES):
            raise
    finally:
        os.close(fd)


def make_folders(path: Path) -> None:
    """`mkdir -p path`, each folder it creates private (mode 0700 whatever the umask)."""
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir(mode=FOLDER_MODE, exist_ok=True)
        os.chmod(folder, FOLDER_MODE)  # mkdir's mode is narrowed by the umask, never widened


def open_append(path: Path, *, read: bool = False) -> int:
    """An `O_APPEND` descriptor on `path`, created 0600 (an older file is narrowed to 0600)."""
    flags = (os.O_RDWR if read else os.O_WRONLY) | os.O_APPEND | os.O_CREAT
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        info = os.fstat(fd)
        # Only a regular file of ours is narrowed: a path that names a device or a pipe
        # (/dev/null, a FIFO a user points us at) is shared, and its mode is not ours to set.
        if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) != FILE_MODE:
            os.chmod(path, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` (mode 0600): readers see the old file or the new, never half."""
    # mkstemp: a unique name (two writers never share a temp file) created 0600.
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def write_json_atomic(path: Path, obj: Any) -> None:
    """`obj` as indented JSON plus a newline, via `write_bytes_atomic`. NaN is refused."""
    text = json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))


def json_line(obj: Mapping[str, Any]) -> bytes:
    """`obj` as one compact JSON line, newline included: the form of our own `.jsonl` files."""
    return (
        json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
    ).encode()


def canonical_json(obj: Any) -> str:
    """`obj` as the official tool's canonical JSON: sorted keys, no spaces, raw UTF-8, NaN
    refused. The form of an `events.jsonl` record and of a `logs.txt` line's details."""
    return json.dumps(
        obj, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
    )


def describe_os_error(exc: OSError) -> str:
    """`[Errno 28] No space left on device: 'path'` without the noise: the reason and path."""
    reason = exc.strerror or str(exc)
    return f"{reason} ({exc.filename})" if exc.filename else reason


_Writer = TypeVar("_Writer", bound="AppendFile")


class AppendFile:
    """What every writer of an append-only results file shares: the descriptor `_fd` (None once
    closed) and the `_lock` its writes take, closed once, and `with` closing it."""

    _fd: int | None
    _lock: threading.Lock

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self: _Writer) -> _Writer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = [
    "FILE_MODE",
    "FOLDER_MODE",
    "AppendFile",
    "WarningSink",
    "canonical_json",
    "describe_os_error",
    "fsync_dir",
    "json_line",
    "make_folders",
    "open_append",
    "write_all",
    "write_bytes_atomic",
    "write_json_atomic",
]
