"""stdout and stderr that nothing on the reading side can break, for every command.

A reader that goes away (`osmosis-tui runs | head -2`, `osmosis-tui eval --headless | head
-3`), a full device (`> /dev/full`) or a terminal that hung up makes every later write fail.
No command may end in a traceback for that, and a run must not stop for it: its record is the
results folder, not the terminal. So `sys.stdout` and `sys.stderr` write through `_Forgiving`
(`tui.cli.main` puts every command behind it; a run adds where its results are): the first
write that fails points the descriptor at /dev/null, which takes everything written after it
— by the reporter, a log handler, or the interpreter flushing the streams at exit — and the
command goes on to its end with the exit status it would have had.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

LOST_STDOUT = "osmosis-tui: stdout can no longer be written"


class _Forgiving(io.RawIOBase):
    """Writes to a descriptor; once a write fails, points it at /dev/null and tells `on_lost`
    (once: from then on every write succeeds)."""

    def __init__(self, fd: int, on_lost: Callable[[OSError], None]) -> None:
        super().__init__()
        self._fd = fd
        self._on_lost = on_lost

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: ReadableBuffer, /) -> int:
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            raise  # a non-blocking descriptor that is full for now: not lost
        except OSError as exc:
            _point_at_devnull(self._fd)
            self._on_lost(exc)
            return memoryview(data).nbytes


def _point_at_devnull(fd: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _forgiving(stream: TextIO, on_lost: Callable[[OSError], None]) -> TextIO:
    """`stream`'s descriptor behind a `_Forgiving`, with `stream`'s encoding and buffering;
    `stream` itself when it has no descriptor (a test's capture)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return stream
    try:
        stream.flush()  # what it holds must not come out after what the new one writes
    except OSError:
        _point_at_devnull(fd)  # lost already; its buffer then drains into /dev/null
    return io.TextIOWrapper(
        io.BufferedWriter(_Forgiving(fd, on_lost)),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=bool(stream.line_buffering),
    )


@contextlib.contextmanager
def forgiving_std_streams(where: str | None = None) -> Iterator[None]:
    """`sys.stdout` and `sys.stderr` that never fail a write during the block. Losing stdout
    is said on stderr, with `where` when a run goes on (what the user still has: the results
    folder); losing stderr is said nowhere, as there is nowhere left to say it. Nested, the
    innermost block's note is the one said."""
    out, err = sys.stdout, sys.stderr
    sys.stderr = _forgiving(err, lambda _exc: None)

    def stdout_lost(exc: OSError) -> None:
        goes_on = "" if where is None else f"; the run is not affected: {where}"
        print(f"{LOST_STDOUT} ({exc.strerror or exc}){goes_on}", file=sys.stderr, flush=True)

    sys.stdout = _forgiving(out, stdout_lost)
    try:
        yield
    finally:
        sys.stdout.flush()  # cannot fail: the last output, or /dev/null
        sys.stderr.flush()
        sys.stdout, sys.stderr = out, err
