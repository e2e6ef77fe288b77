"""`osmosis-tui compare` as the command line chooses its front end: on a terminal it opens the
compare screen (or, with fewer than two runs, the runs screen), and `--fail-on-regression`
still sets the exit status once the screen is closed; off a terminal, or with fewer runs
than it can show, it says what is missing (exit 2, naming the argument)."""

from __future__ import annotations

import contextlib
import os
import pty
import subprocess
from pathlib import Path

import pytest

from tests.eval.runs.command import child_env, osmosis, run_osmosis
from tests.polling import eventually_sync
from tests.tui.compare_states import write_runs

TIMEOUT_SEC = 60.0


class PtyCompare:
    """`osmosis-tui compare ARGS` on a pseudo-terminal of its own: its screen read, keys
    typed."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self._leader, follower = pty.openpty()
        os.set_blocking(self._leader, False)
        try:
            self.process = subprocess.Popen(
                osmosis("compare", *args),
                cwd=cwd,
                env=child_env(TERM="xterm-256color", COLUMNS="120", LINES="40"),
                stdin=follower,
                stdout=follower,
                stderr=follower,
                start_new_session=True,
            )
        finally:
            os.close(follower)
        self.screen = bytearray()

    def read(self) -> bytes:
        # BlockingIOError: nothing yet; EIO: the command has let go of the terminal.
        with contextlib.suppress(BlockingIOError, OSError):
            self.screen.extend(os.read(self._leader, 1 << 16))
        return bytes(self.screen)

    def wait_for(self, text: bytes, what: str) -> None:
        eventually_sync(lambda: text in self.read(), what, timeout=TIMEOUT_SEC)

    def type(self, keys: bytes) -> None:
        os.write(self._leader, keys)

    def finish(self) -> int:
        """The exit status, once the command ended; what it wrote last is read first. The
        screen is read on while it ends: its last frame can fill the terminal's buffer, and
        a terminal nobody reads blocks that write, and the exit after it."""
        try:
            eventually_sync(
                lambda: self.read() and self.process.poll() is not None,
                "the command to end",
                timeout=TIMEOUT_SEC,
            )
            return self.process.wait()
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            while True:  # until a read brings nothing more
                before = len(self.screen)
                if len(self.read()) == before:
                    break
            os.close(self._leader)


@pytest.mark.parametrize(("gate", "status"), [((), 0), (("--fail-on-regression",), 1)])
def test_on_a_terminal_the_screen_opens_and_the_gate_holds_once_it_closes(
    tmp_path: Path, gate: tuple[str, ...], status: int
) -> None:
    write_runs(tmp_path)
    command = PtyCompare(tmp_path, "before", "after", "-o", str(tmp_path), *gate)
    command.wait_for(b"Both sides", "the compare screen's footer")
    command.type(b"q")
    assert command.finish() == status
    if status:
        assert b"3 work items regressed, more than --fail-on-regression 0 allows" in command.read()


def test_with_one_run_on_a_terminal_the_runs_screen_picks_a(tmp_path: Path) -> None:
    write_runs(tmp_path)
    command = PtyCompare(tmp_path, "before", "-o", str(tmp_path), "--fail-on-regression")
    command.wait_for(b"Compare to B = ", "the runs screen")
    # The cursor starts on the first run listed, "after": enter compares it, as A, to B.
    command.type(b"\r")
    command.wait_for(b"Both sides", "the compare screen")
    command.type(b"q")
    assert command.finish() == 1  # from after to before, row 2's second attempt regressed
    assert b"1 work items regressed, more than --fail-on-regression 0 allows" in command.read()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("before",), "B: missing"),
        ((), "A and B: missing"),
        (("before", "--plain"), "B: missing"),
    ],
)
def test_fewer_than_two_runs_off_a_terminal_is_exit_2_naming_the_argument(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    write_runs(tmp_path)
    result = run_osmosis("compare", *args, "-o", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""
