"""`<output>/.locks/<run-name>.lock`: one live run per name, across both tools (EVAL.md §7).

The same lock as the official `osmosis eval run` takes: an exclusive, non-blocking `flock` on
an empty file created 0600 under `<output>/.locks/`, held for the whole invocation, never
deleted or renamed. It lives outside the run folder because `--fresh` renames that folder: a
lock inside it would leave the new folder unlocked. Since both tools lock the same file, an
`osmosis-tui eval --name X` and an `osmosis eval run --name X` never run at once either.

A second run of a held name is refused at once, before anything in the run folder is
touched (`RunLocked`); the message names the holder's process when the system says who it is
(Linux `/proc/locks`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from types import TracebackType

from core.eval.errors import EvalError
from core.eval.results.durable import FILE_MODE, describe_os_error
from core.eval.results.folder import LOCKS_DIR, RunFolderError


class RunLocked(EvalError):
    """Another live run holds this run name's lock; nothing was started (exit status 1)."""

    def __init__(self, run_name: str, path: Path, holder: int | None) -> None:
        self.run_name = run_name
        self.path = path
        self.holder = holder
        by = f" (process {holder})" if holder is not None else ""
        super().__init__(
            f"run {run_name!r} is already running: another osmosis-tui eval or osmosis eval "
            f"run{by} holds {path}; wait for it to finish, or give a different --name"
        )


def lock_path(output: Path, run_name: str) -> Path:
    return output / LOCKS_DIR / f"{run_name}.lock"


def _holder(fd: int) -> int | None:
    """The pid holding a flock on the file open at `fd`, from `/proc/locks` (Linux)."""
    info = os.fstat(fd)
    wanted = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF"; a waiter's line has "->".
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and "->" not in fields:
            pid, where = fields[4], fields[5]
            if where == wanted and pid.isdigit():
                return int(pid)
    return None


def lock_holder(output: Path, run_name: str) -> int | None:
    """The process holding `run_name`'s lock now, as the system says (Linux `/proc/locks`),
    found without trying to take the lock: looking must never turn a run that starts at
    that moment away. None when nobody holds it, or when the system does not say."""
    try:
        fd = os.open(lock_path(output, run_name), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        return _holder(fd)
    finally:
        os.close(fd)


class RunLock:
    """The held lock of one run name; `release()` (or leaving the `with`) lets it go."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, output: Path, run_name: str) -> RunLock:
        """Take the lock of `run_name` under `output`, or raise `RunLocked` at once.

        `RunFolderError` when the lock cannot be created (a read-only or foreign output).
        """
        path = lock_path(output, run_name)
        try:
            fd = cls._open(path)
        except OSError as exc:
            raise RunFolderError(
                f"cannot write the results under {output}: {describe_os_error(exc)}"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd) if exc.errno in (errno.EAGAIN, errno.EACCES) else None
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise RunLocked(run_name, path, holder) from None
            raise
        return cls(path, fd)

    @staticmethod
    def _open(path: Path) -> int:
        cloexec = getattr(os, "O_CLOEXEC", 0)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(path, os.O_RDWR | os.O_CREAT | cloexec, FILE_MODE)
        except OSError:
            # An existing lock can still be held through a read-only descriptor: a run folder
            # on a disk gone read-only is then refused by what it cannot write, by name.
            if not path.is_file():
                raise
            return os.open(path, os.O_RDONLY | cloexec)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


__all__ = ["RunLock", "RunLocked", "lock_holder", "lock_path"]
