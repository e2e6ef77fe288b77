"""`osmosis-tui eval` with its dashboard in a real pseudo-terminal, for the tests that close the
terminal under it: its screen read as it draws, keys typed, the terminal closed as a terminal
emulator (or tmux) closes it, and what the run left behind once it ended."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

from core.eval.results.folder import CONTROL_SOCKET_FILE, LOCKS_DIR
from tests.eval.runs.command import child_env, osmosis
from tests.eval.runs.files import run_folder
from tests.polling import eventually_sync

START_TIMEOUT_SEC = 60.0


# Run before the eval, in its new session: its standard input (the pty) becomes its controlling
# terminal, so that the terminal's closing hangs it up as a shell's terminal does. (A
# `preexec_fn` would do it in the forked child of a threaded process: unsafe.)
_WITH_CONTROLLING_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


class PtyEval:
    """One `osmosis-tui eval ARGS --name NAME` run in `cwd`, on a terminal of its own."""

    def __init__(self, cwd: Path, name: str, *args: str, controlling: bool) -> None:
        """`controlling`: the pty is the eval's controlling terminal (closing it sends the
        eval SIGHUP and SIGCONT), else only its standard streams."""
        self.folder = run_folder(cwd, name)
        self.lock = self.folder.parent / LOCKS_DIR / f"{name}.lock"
        self._leader, follower = pty.openpty()
        os.set_blocking(self._leader, False)
        command = osmosis("eval", *args, "--name", name)
        if controlling:
            command = [sys.executable, "-I", "-c", _WITH_CONTROLLING_TERMINAL, *command]
        try:
            self.process = subprocess.Popen(
                command,
                cwd=cwd,
                env=child_env(TERM="xterm-256color", COLUMNS="120", LINES="40"),
                stdin=follower,
                stdout=follower,
                stderr=follower,
                start_new_session=True,  # its own session, as a shell's terminal gives it
            )
        finally:
            os.close(follower)
        self._open = True
        self.screen = bytearray()

    def read(self) -> bytes:
        """What the terminal shows so far (read on: a terminal nobody reads blocks writes)."""
        if self._open:
            try:
                self.screen.extend(os.read(self._leader, 1 << 16))
            except BlockingIOError:
                pass
            except OSError:  # EIO: every process holding the terminal has let go of it
                pass
        return bytes(self.screen)

    def wait_for_screen(self, text: bytes, what: str) -> None:
        eventually_sync(lambda: text in self.read(), what, timeout=START_TIMEOUT_SEC)

    def type(self, keys: bytes) -> None:
        os.write(self._leader, keys)

    def close_terminal(self) -> None:
        """The terminal goes away (its window closed, its tmux session killed)."""
        if self._open:
            self._open = False
            os.close(self._leader)

    def finish(self, timeout: float) -> int | None:
        """The eval's exit status once it ended within `timeout` seconds, else None (it is
        killed then, and the terminal closed)."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self.close_terminal()

    def metrics(self) -> dict[str, Any]:
        metrics: dict[str, Any] = json.loads((self.folder / "metrics.json").read_text())
        return metrics

    def name_is_free(self) -> bool:
        """Nothing holds the run name's lock (a resume would be let in)."""
        fd = os.open(self.lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)
        return True

    def control_socket_left(self) -> bool:
        return (self.folder / CONTROL_SOCKET_FILE).exists()
