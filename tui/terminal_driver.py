"""The dashboard's terminal driver: Textual's Linux driver, made safe for a terminal that goes
away or stops reading (issue 30, item 2).

Textual draws the screen from a thread of its own (`textual-output`) that takes the frames
from a queue of 30: the app's event loop blocks whenever that queue is full. Its thread dies
on the first write that fails (a terminal that hung up: EIO), so 30 frames later the loop
blocked for good, and with it every signal handler, the run's end and its name's lock. And a
terminal that nobody reads blocks the thread in its write, with the same end. This driver:

- writes through `TerminalOutput`, which never raises and never blocks for good: a terminal
  that fails a write is lost, whatever is drawn after it is dropped, and the app is told
  (`TerminalDriver.Lost`), to end the run as a hang-up would;
- once the app closes, or a stop is asked for (`give_up_terminal`), gives the terminal
  `GIVE_UP_AFTER_SEC` to take what is drawn: a terminal that takes nothing for that long is
  given up like a lost one, so that no shutdown waits on it;
- resumes after SIGCONT only what a SIGTSTP suspended: Textual started a second writer and
  input thread on any SIGCONT, and a hang-up sends one.
"""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Callable

from textual.app import App
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

#: How long a closing dashboard waits for its terminal to take a write before giving it up.
GIVE_UP_AFTER_SEC = 2.0
#: How often a write the terminal cannot take yet looks again (and at the deadline).
_WAIT_SEC = 0.1


class TerminalOutput:
    """The file Textual's output thread writes the screen to: the terminal's descriptor,
    written without blocking (a copy of its own, so that nothing else's writes change)."""

    def __init__(self, fd: int, on_lost: Callable[[], None]) -> None:
        self._fd = fd
        self._out = _nonblocking_copy(fd)
        self._pending = bytearray()
        self._on_lost = on_lost
        #: The terminal failed a write, or took none until the deadline: nothing more is written.
        self.gone = False
        self._give_up_at: float | None = None

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def give_up_after(self, seconds: float) -> None:
        """From now on, a terminal that takes no write for `seconds` is given up (any thread;
        an earlier deadline stays)."""
        deadline = time.monotonic() + seconds
        if self._give_up_at is None or deadline < self._give_up_at:
            self._give_up_at = deadline

    def write(self, text: str) -> int:
        if not self.gone:
            self._pending += text.encode("utf-8", "replace")
        return len(text)

    def flush(self) -> None:
        """Write out what is pending (in the output thread): as the terminal takes it, until
        it fails or the deadline passes."""
        while self._pending and not self.gone:
            try:
                written = os.write(self._out, self._pending)
            except BlockingIOError:
                give_up_at = self._give_up_at
                if give_up_at is not None and time.monotonic() >= give_up_at:
                    self._lose()
                else:
                    select.select([], [self._out], [], _WAIT_SEC)
            except OSError:  # EIO: hung up; the descriptor closed
                self._lose()
            else:
                del self._pending[:written]

    def close(self) -> None:
        if self._out != self._fd:
            os.close(self._out)
            self._out = self._fd

    def _lose(self) -> None:
        self.gone = True
        self._pending.clear()
        self._on_lost()


def _nonblocking_copy(fd: int) -> int:
    """The terminal at `fd` opened anew, without blocking (O_NONBLOCK is a flag of the open
    file, which the process's stderr shares with its shell); `fd` itself when it is no
    terminal that can be opened again."""
    try:
        return os.open(os.ttyname(fd), os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return fd


class TerminalDriver(LinuxDriver):
    """`LinuxDriver` through a `TerminalOutput` (see the module's docstring)."""

    class Lost(Message):
        """The terminal is gone (a write failed) or was given up: the app is told, once."""

    def __init__(
        self,
        app: App[object],
        *,
        debug: bool = False,
        mouse: bool = True,
        size: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(app, debug=debug, mouse=mouse, size=size)
        assert sys.__stderr__ is not None  # LinuxDriver writes to it too
        self.output = TerminalOutput(sys.__stderr__.fileno(), self._lost)
        self._file = self.output  # type: ignore[assignment]  # all LinuxDriver uses is a file
        self._suspended = False

    def give_up_terminal(self) -> None:
        """Stop waiting on a terminal that takes no output (`GIVE_UP_AFTER_SEC`): a stop was
        asked for, or the app closes. Safe from a signal handler."""
        self.output.give_up_after(GIVE_UP_AFTER_SEC)

    def disable_input(self) -> None:
        # The first step of the app's shutdown: no step of it may wait on the terminal.
        self.give_up_terminal()
        super().disable_input()

    def close(self) -> None:
        self.give_up_terminal()
        super().close()  # the output thread ends once it has written or dropped the rest
        self.output.close()

    def _lost(self) -> None:
        # In the output thread; post_message is safe from any thread.
        self._app.post_message(self.Lost())

    def _sigtstp_application(self, *args: object) -> None:
        self._suspended = self._auto_restart and not self.output.gone
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args: object) -> None:
        # Only a suspension of ours is resumed: not a SIGCONT that came with a hang-up, nor
        # one that follows a SIGSTOP, which suspended nothing of the app.
        if self._suspended:
            self._suspended = False
            super()._sigcont_application(*args)
