"""The lifeline that makes a launched child's process group die with the eval, however the eval
dies (EVAL.md §5): a pipe, and a small guard process at the head of the group.

The launcher starts every child (`uv sync`, `uv run` and the rollout server under it) through
the guard, this file run as a script by the eval's own interpreter (`-I`: the standard library
only, whatever the child's environment says). The guard leads the child's new session and
process group, holds the read end of a pipe whose only write end the eval holds, and runs the
command in its group. While the eval lives, the guard waits for the command and exits as it
did: stopping the group stays the launcher's job (SIGTERM, then SIGKILL after the grace). When
the eval is gone, the kernel closes the write end, the read end reports EOF, and the guard
stops the group itself: SIGTERM, then, once the command has ended or the grace is over,
SIGKILL to what is left of the group, the guard last.

Why a pipe and not `prctl(PR_SET_PDEATHSIG)`: that signal is sent when the *thread* that
forked the child ends, not its process; it is per process and cleared for the children of a
child, so it would reach `uv run` and never the Python (and its helpers) that `uv run`
starts; and it is Linux only. The kernel closes an eval's descriptors on every kind of death
(SIGKILL, the OOM killer, a crash), on every POSIX system, and the guard turns that into a
signal for the whole group. `PR_SET_CHILD_SUBREAPER` would only choose who reaps orphans; it
kills nothing. A process that leaves the group (`setsid`) escapes this, as it escapes the
launcher's own stop.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn


def guarded_command(command: Sequence[str], lifeline: int, *, grace_sec: float) -> list[str]:
    """`command` run under the guard, which watches `lifeline` (the read end of the pipe; pass
    it to the child) and gives the group `grace_sec` between SIGTERM and SIGKILL."""
    return [
        sys.executable,
        "-I",
        os.path.abspath(__file__),
        str(lifeline),
        repr(grace_sec),
        *command,
    ]


def _ignore(_signum: int, _frame: object) -> None:
    """The group's SIGTERM is meant for the command, which gets it too: the guard stays until
    the command has ended (a handler, not SIG_IGN, which the command would inherit)."""


def _guard(lifeline: int, grace_sec: float, command: list[str]) -> NoReturn:
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _ignore)
    try:
        child = subprocess.Popen(command)  # in the group, with the output; without `lifeline`
    except OSError as exc:
        print(f"cannot run {command[0]}: {exc}", file=sys.stderr, flush=True)
        sys.exit(127)  # as a shell says "command not found"
    ended: queue.SimpleQueue[int | None] = queue.SimpleQueue()  # the command's status; None: EOF

    def watch_lifeline() -> None:
        while os.read(lifeline, 1):  # nothing is ever written: this returns at EOF only
            pass
        ended.put(None)

    threading.Thread(target=lambda: ended.put(child.wait()), daemon=True).start()
    threading.Thread(target=watch_lifeline, daemon=True).start()
    status = ended.get()
    if status is None:  # the eval is gone: nobody else will stop the group
        _stop_group(ended, grace_sec)
    _exit_as(status)


def _stop_group(ended: queue.SimpleQueue[int | None], grace_sec: float) -> NoReturn:
    """SIGTERM to the group; once the command has ended, or after the grace, SIGKILL to what
    is left of it, the guard included."""
    os.killpg(0, signal.SIGTERM)
    with contextlib.suppress(queue.Empty):
        ended.get(timeout=grace_sec)
    os.killpg(0, signal.SIGKILL)
    os._exit(128 + signal.SIGKILL)  # not reached: the signal has ended the guard as well


def _exit_as(status: int) -> NoReturn:
    """Exit as the command did: with its code, or by the signal that ended it."""
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(128 - status if status < 0 else status)


if __name__ == "__main__":
    _guard(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:])
