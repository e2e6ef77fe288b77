"""The lifeline's guard (`core.eval.servers.lifeline`), run as the launcher runs it: a process
leading a session of its own, holding the read end of a pipe whose write end the test holds, its
command a real Python (or a tool reading /proc: Linux only). Nothing here measures time: each
wait is bounded only so that a guard that does not end fails the test instead of hanging it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

import pytest

from core.eval.servers.lifeline import guarded_command
from tests.polling import eventually_sync

#: Longer than any of these guards takes to end.
ENDS_WITHIN_SEC = 30.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@dataclass
class Guarded:
    process: subprocess.Popen[str]
    write_end: int | None
    """The lifeline's write end while the test (the eval) holds it."""

    def line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def eval_gone(self) -> None:
        assert self.write_end is not None
        os.close(self.write_end)
        self.write_end = None

    def wait(self) -> int:
        return self.process.wait(ENDS_WITHIN_SEC)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@contextmanager
def guarded(argv: list[str], *, grace_sec: float = 5.0) -> Iterator[Guarded]:
    """`argv` under the guard; its stdout is read line by line."""
    read_end, write_end = os.pipe()
    command = guarded_command(argv, read_end, grace_sec=grace_sec)
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the guard stops its own group, never the test's
        pass_fds=(read_end,),
    )
    os.close(read_end)
    run = Guarded(process, write_end)
    try:
        yield run
    finally:
        if run.write_end is not None:
            os.close(run.write_end)
        # The whole group, also when the guard has ended: what it left must not outlive a
        # failed test.
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for stream in (process.stdout, process.stderr):
            assert stream is not None
            stream.close()


def running(pid: int) -> bool:
    """Neither gone nor a zombie (one whose guard died first waits for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("code", [0, 3])
def test_the_guard_exits_with_the_command_s_code(code: int) -> None:
    with guarded(python(f"import sys; sys.exit({code})")) as run:
        assert run.wait() == code


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGKILL], ids=["SIGUSR1", "SIGKILL"])
def test_the_guard_ends_by_the_signal_that_ended_the_command(signum: int) -> None:
    """SIGKILL too, which has no handler to reset (setting one raised: a traceback, exit 1)."""
    with guarded(python(f"import os; os.kill(os.getpid(), {signum})")) as run:
        assert run.wait() == -signum


def test_a_command_that_cannot_run_is_exit_127_naming_it() -> None:
    read_end, write_end = os.pipe()
    try:
        command = guarded_command(["/nonexistent/uv", "sync"], read_end, grace_sec=1.0)
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            start_new_session=True,
            pass_fds=(read_end,),
            timeout=ENDS_WITHIN_SEC,
            check=False,
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result.returncode == 127
    assert result.stderr.startswith("cannot run /nonexistent/uv: ")


def test_the_command_holds_only_its_stdio() -> None:
    """Not the lifeline (else the eval's end would not be the guard's EOF while the command
    lives), nor the guard's own pipe."""
    with guarded(["ls", "/proc/self/fd"]) as run:
        assert run.process.stdout is not None
        listed = sorted(int(fd) for fd in run.process.stdout.read().split())
        assert run.wait() == 0
    assert listed == [0, 1, 2, 3]  # 3: the folder ls itself is reading


def test_the_command_does_not_inherit_python_s_ignored_sigpipe() -> None:
    """Python ignores SIGPIPE; the command must die of a closed pipe, as from a shell."""
    with guarded(["grep", "^SigIgn:", "/proc/self/status"]) as run:
        ignored = int(run.line().split()[1], 16)
        assert run.wait() == 0
    assert not ignored & (1 << (signal.SIGPIPE - 1))


def test_when_the_eval_is_gone_the_group_gets_sigterm_and_then_sigkill() -> None:
    code = (
        "import signal, sys, time\n"
        "def stop(*_):\n"
        "    print('sigterm', flush=True); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    with guarded(python(code)) as run:
        assert run.line() == "ready"
        run.eval_gone()
        assert run.line() == "sigterm"
        assert run.wait() == -signal.SIGKILL  # the guard ends with its group


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    code = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(60)\n"
    )
    with guarded(python(code), grace_sec=0.2) as run:
        pid = int(run.line())
        run.eval_gone()
        assert run.wait() == -signal.SIGKILL
        assert run.line() == ""  # its output closed: the command is gone with the group
    assert not running(pid)


def test_the_group_s_sigterm_is_for_the_command_and_the_guard_exits_as_it_did() -> None:
    """The launcher's own stop: SIGTERM to the whole group while the eval still holds the
    lifeline. The guard stays until its command has ended, and says how it ended."""
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    with guarded(python(code)) as run:
        assert run.line() == "ready"
        os.killpg(run.process.pid, signal.SIGTERM)
        assert run.wait() == 143


def starts_a_server(then: str) -> list[str]:
    """A command that starts a "server" in its group, as `uv run` starts the rollout server,
    says both pids, then does `then`."""
    return python(
        "import os, subprocess, sys, time\n"
        "server = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print(os.getpid(), server.pid, flush=True)\n"
        f"{then}\n"
    )


def reaped(pid: int) -> bool:
    """Gone from /proc: its parent (the guard) has waited for it, not only a zombie."""
    return not os.path.exists(f"/proc/{pid}")


@pytest.mark.parametrize(
    "end", ["sigkill", "exit"], ids=["command-sigkilled", "command-exits-first"]
)
def test_what_the_command_left_in_the_group_stays_guarded_until_the_eval_is_gone(
    end: str,
) -> None:
    """`uv run` SIGKILLed (or a command that ends before what it started) while the server
    goes on serving: the guard stays at the head of the group, and the eval's end still takes
    the server with it. (Before, the guard ended with its command: nothing held the lifeline,
    and a SIGKILLed eval left the server serving.)"""
    then = "time.sleep(600)" if end == "sigkill" else "sys.exit(0)"
    with guarded(starts_a_server(then)) as run:
        command, server = (int(pid) for pid in run.line().split())
        if end == "sigkill":
            os.kill(command, signal.SIGKILL)
        eventually_sync(lambda: reaped(command), "the guard to reap its command")
        assert running(server)
        run.eval_gone()
        assert run.wait() == -signal.SIGKILL  # the guard ends with its group
        eventually_sync(lambda: not running(server), "the server to go with the eval")


@pytest.mark.parametrize(
    ("then", "status"),
    [("time.sleep(600)", -signal.SIGKILL), ("sys.exit(3)", 3)],
    ids=["command-sigkilled", "command-exits-3"],
)
def test_the_guard_ends_as_its_command_did_once_its_group_is_empty(then: str, status: int) -> None:
    with guarded(starts_a_server(then)) as run:
        command, server = (int(pid) for pid in run.line().split())
        if status == -signal.SIGKILL:
            os.kill(command, signal.SIGKILL)
        eventually_sync(lambda: reaped(command), "the guard to reap its command")
        os.kill(server, signal.SIGTERM)
        assert run.wait() == status  # told once the group is empty, the eval still there
        assert run.write_end is not None
