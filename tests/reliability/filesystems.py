"""Filesystems that fail: a tiny tmpfs to fill up or remount read-only (root only)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _mount(*args: str) -> bool:
    try:
        done = subprocess.run(["mount", *args], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30, check=False)


@contextlib.contextmanager
def small_filesystem(size: str = "256k") -> Iterator[Path | None]:
    """A fresh tmpfs of `size` (root only); None where mounting is not allowed."""
    mountpoint = Path(tempfile.mkdtemp(prefix="osmosis-tmpfs-"))
    mounted = os.geteuid() == 0 and _mount(
        "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)
    )
    try:
        yield mountpoint if mounted else None
    finally:
        if mounted:
            _umount(mountpoint)
        with contextlib.suppress(OSError):
            mountpoint.rmdir()


def remount(path: Path, *, read_only: bool) -> bool:
    """Make a tmpfs from `small_filesystem` read-only or writable again."""
    return _mount("-o", f"remount,{'ro' if read_only else 'rw'}", str(path))


def fill(folder: Path) -> Path:
    """Write one file until the filesystem under `folder` is full; returns it."""
    filler = folder / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    return filler
