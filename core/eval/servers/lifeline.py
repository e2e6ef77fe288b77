"""The lifeline that makes a launched child's process group die with the eval, however the eval
dies (EVAL.md §5): a pipe, and a small guard process at the head of the group.

The launcher starts every child (`uv sync`, `uv run` and the rollout server under it) through
the guard, this file run as a script by the eval's own interpreter (`-I`: the standard library
only, whatever the child's environment says). The guard leads the child's new session and
process group, holds the read end of a pipe whose only write end the eval holds, and runs the
command in its group. While the eval lives, the guard waits until its group is empty — the
command ended, and whatever it started in the group too (a SIGKILLed `uv run` leaves its server
serving) — and exits as the command did: stopping the group stays the launcher's job (SIGTERM,
then SIGKILL after the grace), and a guard that ends while its group lives on (killed) is
taken by the launcher for the end of the group, which it kills. When the eval is gone, the
kernel closes the write end, the read end reports EOF, and the guard stops the group itself:
SIGTERM, then, once the group is empty but for the guard or the grace is over, SIGKILL to what
is left of the group, the guard last.

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

import os
import select
import signal
import sys
import time

# The guard starts before every child (`uv sync`, the server) and so is on the way to every
# run's first rollout: it imports only what a bare interpreter has at hand. `typing` alone
# would add a third to its start; mypy reads this flag as `typing.TYPE_CHECKING`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn

# What Python ignores and `subprocess` gives back to a child its default for (SIGPIPE among
# them): the command must die of a closed pipe as it would started from a shell.
_RESTORED = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)
# How often the guard looks whether its group is empty, once its command has ended.
_GROUP_POLL_SEC = 0.2


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
    the command has ended (a handler, not SIG_IGN, which the command would inherit). SIGCHLD
    gets it too, so that its arrival wakes the guard (`signal.set_wakeup_fd`)."""


def _guard(lifeline: int, grace_sec: float, command: list[str]) -> NoReturn:
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _ignore)
    # Before the command exists, so that its end, however soon, is never missed.
    wakeup = _wakeup_pipe()
    os.set_inheritable(lifeline, False)  # the command must not hold the group's lifeline
    try:
        # Its own stdio and environment; no descriptor of ours (both ends above close on exec).
        pid = os.posix_spawnp(command[0], command, os.environ, setsigdef=_RESTORED)
    except OSError as exc:
        print(f"cannot run {command[0]}: {exc}", file=sys.stderr, flush=True)
        sys.exit(127)  # as a shell says "command not found"
    status: int | None = None  # the command's, once it ended
    while True:
        # Once the command has ended, what it left in the group is no child of the guard's:
        # its end sends no SIGCHLD, and is looked for every _GROUP_POLL_SEC.
        timeout = None if status is None else _GROUP_POLL_SEC
        readable, _, _ = select.select([lifeline, wakeup], [], [], timeout)
        if wakeup in readable:
            _drain(wakeup)
        if status is None:
            status = _ended(pid)
        # Nothing is ever written to the lifeline: readable means EOF, the eval is gone, and
        # nobody else will stop the group.
        if lifeline in readable and not os.read(lifeline, 1):
            _stop_group(pid, status, wakeup, grace_sec)
        if status is not None and not _others_in_group():
            _exit_as(status)


def _wakeup_pipe() -> int:
    """The read end of a pipe that gets a byte whenever a signal arrives: what the guard
    waits on, besides the lifeline, for its command's end (SIGCHLD)."""
    read_end, write_end = os.pipe()  # not inheritable: closed in the command
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, _ignore)
    return read_end


def _drain(wakeup: int) -> None:
    try:
        while os.read(wakeup, 512):
            pass
    except BlockingIOError:
        pass


def _ended(pid: int) -> int | None:
    """The command's exit code (negative: the signal that ended it), None while it runs."""
    done, status = os.waitpid(pid, os.WNOHANG)
    return os.waitstatus_to_exitcode(status) if done else None


def _others_in_group() -> bool:
    """Whether a process of the guard's group other than the guard still runs (a zombie has
    ended). Read from /proc; where there is none, nothing is seen and the guard ends with its
    command, as the group's own end cannot be told."""
    group, me = os.getpgrp(), os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                # "pid (comm) state ppid pgrp ...": comm may hold anything, ")" included.
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:  # gone meanwhile
            continue
        if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == group:
            return True
    return False


def _stop_group(pid: int, status: int | None, wakeup: int, grace_sec: float) -> NoReturn:
    """SIGTERM to the group; once nothing but the guard is left of it, or after the grace,
    SIGKILL to what is left of it, the guard included. (`status`: the command's, if it has
    ended already.)"""
    os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + grace_sec
    while (left := deadline - time.monotonic()) > 0:
        if status is None:
            status = _ended(pid)
        if status is not None and not _others_in_group():
            break
        if select.select([wakeup], [], [], min(left, _GROUP_POLL_SEC))[0]:
            _drain(wakeup)
    os.killpg(0, signal.SIGKILL)
    os._exit(128 + signal.SIGKILL)  # not reached: the signal has ended the guard as well


def _exit_as(status: int) -> NoReturn:
    """Exit as the command did: with its code, or by the signal that ended it."""
    if status < 0:
        if -status != signal.SIGKILL:  # no handler to reset: setting one raises
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(128 - status if status < 0 else status)


if __name__ == "__main__":
    _guard(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:])
