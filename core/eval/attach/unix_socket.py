"""The control socket of a live run, `<run>/control.sock`: bound, found stale, connected to.

A Unix stream socket inside the run folder, which is 0700; the socket itself is 0600 (its mode
is set before it is bound, so it never exists with a wider one), and the server also checks
each peer's uid where the system tells it (`SO_PEERCRED`). Only the run that holds the run
name's lock (`core.eval.results.lock`) binds it, so a socket file found there at start was
left by a run that died without removing it (SIGKILL): when nothing answers on it, it is
unlinked and bound again; one that answers belongs to a live process, and is left alone.

Unix socket addresses are short (108 bytes on Linux, with the NUL; 104 on macOS), and a run
folder's path can be longer. Such a path is reached through the folder itself instead: the
folder is opened, and the socket is bound (or connected to) as
`/proc/self/fd/<fd>/control.sock`, which the kernel resolves to the same file whatever the
folder's path; no working directory changes, so nothing else in the process notices. Where
there is no `/proc/self/fd` (not Linux), a run folder too deep for an address is served
nowhere: the run goes on, and says that it cannot be attached to.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import struct
from collections.abc import Iterator
from pathlib import Path

from core.eval.errors import EvalError
from core.eval.results.durable import FILE_MODE
from core.eval.results.folder import CONTROL_SOCKET_FILE

#: The longest address `bind` and `connect` take, without the terminating NUL.
MAX_ADDRESS_BYTES = 103 if os.uname().sysname == "Darwin" else 107
#: How long a connect may take before the socket counts as dead (a live run accepts at once).
CONNECT_TIMEOUT_SEC = 2.0
_PROC_FDS = Path("/proc/self/fd")
# struct ucred: pid, uid, gid.
_UCRED = struct.Struct("3i")


class ControlError(EvalError):
    """Serving a run's control socket, or talking over it, failed (the message says why).
    The root of the control errors: the viewer's are in `core.eval.attach.client`."""


class ControlSocketError(ControlError):
    """The control socket cannot be bound or reached (the message says why)."""


def socket_path(folder: Path) -> Path:
    return folder / CONTROL_SOCKET_FILE


@contextlib.contextmanager
def _address(folder: Path) -> Iterator[str]:
    """An address of `<folder>/control.sock` that fits in a socket address, for the duration
    of a bind or connect (the folder's descriptor, when one is used, is closed after)."""
    direct = str(socket_path(folder))
    if len(os.fsencode(direct)) <= MAX_ADDRESS_BYTES:
        yield direct
        return
    if not _PROC_FDS.is_dir():
        raise ControlSocketError(
            f"{folder}: the path is too long for a Unix socket address "
            f"({MAX_ADDRESS_BYTES} bytes at most) and this system has no /proc/self/fd"
        )
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        yield f"{_PROC_FDS}/{fd}/{CONTROL_SOCKET_FILE}"
    finally:
        os.close(fd)


def connect(folder: Path) -> socket.socket:
    """A connected, non-blocking socket to the run's control socket.

    `FileNotFoundError` when there is none, `ConnectionRefusedError` when nothing serves it
    (a stale one), `ControlSocketError` when the path cannot be reached at all."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_SEC)
        with _address(folder) as address:
            sock.connect(address)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def is_served(folder: Path) -> bool:
    """Whether a live process serves the run's control socket now."""
    try:
        connect(folder).close()
    except (OSError, ControlSocketError):
        return False
    return True


class BoundSocket:
    """The listening control socket of a run; `close()` removes its file."""

    def __init__(self, folder: Path) -> None:
        """Bind `<folder>/control.sock` (0600), replacing a stale one.

        `ControlSocketError` when it cannot: a live process serves it already, something
        other than a socket holds the name, or the bind failed."""
        self.path = socket_path(folder)
        self._remove_stale()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # On Linux a bound socket file gets the socket's own mode (narrowed by the
            # umask): set before the bind, the file is never more open than 0600. Elsewhere
            # the chmod below narrows it, in a folder nobody else may enter anyway.
            with contextlib.suppress(OSError):
                os.fchmod(sock.fileno(), FILE_MODE)
            with _address(folder) as address:
                sock.bind(address)
                os.chmod(address, FILE_MODE)
            sock.listen()
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise ControlSocketError(f"cannot bind {self.path}: {exc.strerror or exc}") from exc
        except BaseException:
            sock.close()
            raise
        self.socket = sock
        # The file is removed at the end only if it is still this one, never another's (a
        # freed inode number is soon reused: its change time tells them apart).
        self._identity = _identity(os.stat(self.path))

    def _remove_stale(self) -> None:
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(info.st_mode):
            raise ControlSocketError(f"{self.path} exists and is not a socket: left alone")
        try:
            connect(self.path.parent).close()
        except (ConnectionRefusedError, FileNotFoundError):
            pass  # nobody listens: a run that died without removing it
        except OSError as exc:
            if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                raise ControlSocketError(f"cannot tell whether {self.path} is live: {exc}") from exc
        else:
            raise ControlSocketError(f"{self.path} is served by another live process")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def close(self) -> None:
        """Stop listening and remove the socket file (if it is still ours)."""
        self.socket.close()
        with contextlib.suppress(OSError):
            if _identity(os.stat(self.path)) == self._identity:
                os.unlink(self.path)


def _identity(info: os.stat_result) -> tuple[int, int, int]:
    return info.st_dev, info.st_ino, info.st_ctime_ns


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end, where the system says (`SO_PEERCRED`)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        credentials = sock.getsockopt(socket.SOL_SOCKET, option, _UCRED.size)
    except OSError:
        return None
    _pid, uid, _gid = _UCRED.unpack(credentials)
    return int(uid)


__all__ = [
    "BoundSocket",
    "ControlError",
    "ControlSocketError",
    "connect",
    "is_served",
    "peer_uid",
    "socket_path",
]
