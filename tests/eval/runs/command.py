"""The `osmosis-tui eval` command in a subprocess, the environment it gets, and the processes it
leaves: what the acceptance tests run and check."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.polling import eventually_sync

REPO = Path(__file__).resolve().parents[3]
SECRET_ENV = ("ROLLOUT_LLM_API_KEY", "OSMOSIS_ROLLOUT_SERVER_API_KEY")
RUN_TIMEOUT_SEC = 120.0
_SITE_DIRS = (
    "import json, sysconfig; "
    "print(json.dumps([sysconfig.get_path(name) for name in ('purelib', 'platlib')]))"
)


@functools.cache
def rollout_pythonpath(python: str | Path = sys.executable) -> str:
    """PYTHONPATH for the rollouts an eval run by `python` launches: this repository and
    `python`'s packages.

    The launcher runs a workspace rollout in the environment uv builds from its pyproject.toml,
    on the eval's own interpreter (core/eval/servers/uv_project.py). The fixture rollouts declare no
    dependencies, so that `uv sync` needs no network, and import server_stub, uvicorn and
    httpx (or the official osmosis_ai) from here.
    """
    answer = subprocess.run(
        [str(python), "-c", _SITE_DIRS], capture_output=True, text=True, check=True
    )
    site_dirs: list[str] = json.loads(answer.stdout)
    return os.pathsep.join(dict.fromkeys([str(REPO), *site_dirs]))


def osmosis(*args: str, python: str | Path = sys.executable) -> list[str]:
    """The `osmosis-tui` command line, run by `python` (`python -m tui`)."""
    return [str(python), "-m", "tui", *args]


def child_env(*, python: str | Path = sys.executable, **extra: str) -> dict[str, str]:
    """This process's environment without the eval's secrets, with the PYTHONPATH a rollout
    launched by an eval that `python` runs needs, plus `extra`."""
    env = {key: value for key, value in os.environ.items() if key not in SECRET_ENV}
    inherited = env.get("PYTHONPATH")
    env["PYTHONPATH"] = rollout_pythonpath(python) + (os.pathsep + inherited if inherited else "")
    env.update(extra)
    return env


def run_osmosis(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    python: str | Path = sys.executable,
    timeout: float = 60,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`osmosis-tui args...` in a subprocess, its output captured, `stdin` its input (default:
    none at all, so nothing can wait for an answer)."""
    return subprocess.run(
        osmosis(*args, python=python),
        cwd=cwd,
        env=env or child_env(python=python),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
    )


def run_eval(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    python: str | Path = sys.executable,
    timeout: float = RUN_TIMEOUT_SEC,
    stdin: str | None = None,
    before: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """`osmosis-tui [before...] eval args...`, `stdin` its input (default: none at all)."""
    return run_osmosis(
        *before, "eval", *args, cwd=cwd, env=env, python=python, timeout=timeout, stdin=stdin
    )


@dataclass
class RunningEval:
    """An eval subprocess; its stdout and stderr go to files, readable while it runs (a pipe
    nobody reads until the end could fill up and block it)."""

    process: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def until(self, condition: Callable[[], object], what: str) -> None:
        """Wait for `condition` while the eval runs; fail with its output if it ends first
        or the wait times out."""
        eventually_sync(
            lambda: condition() or self.process.poll() is not None, what, explain=self.output
        )
        if not condition():
            pytest.fail(f"the eval ended before {what}\n{self.output()}")

    def output(self) -> str:
        """Its exit status (None while it runs) and the ends of its stdout and stderr."""
        tail = -4000
        return (
            f"exit status: {self.process.poll()}\n"
            f"stdout:\n{self.stdout_path.read_text()[tail:]}\nstderr:\n{self.stderr()[tail:]}"
        )

    def send_signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def finish(self, timeout: float = RUN_TIMEOUT_SEC) -> tuple[str, str]:
        """Wait for the exit (killing it past `timeout`); its stdout and stderr."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"eval did not end within {timeout} s\nstderr:\n{self.stderr()}")
        return self.stdout_path.read_text(), self.stderr()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode


def start_eval(
    *args: str, cwd: Path, env: dict[str, str] | None = None, within: tuple[str, ...] = ()
) -> RunningEval:
    """`osmosis-tui eval args...` started, run by the command `within` when given (which
    ends by running the command line it is given after its own words)."""
    handle, name = tempfile.mkstemp(dir=cwd, prefix="eval-", suffix=".out")
    os.close(handle)
    stdout, stderr = Path(name), Path(name).with_suffix(".err")
    with stdout.open("w") as out, stderr.open("w") as err:
        process = subprocess.Popen(
            [*within, *osmosis("eval", *args)],
            cwd=cwd,
            env=env or child_env(),
            stdin=subprocess.DEVNULL,  # never a terminal: nothing may wait for an answer
            stdout=out,
            stderr=err,
        )
    return RunningEval(process, stdout, stderr)


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel, which counts a zombie as alive
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def launched_process(pids: list[int], which: str) -> int:
    """Among the processes of one launch (`processes_in`), its `guard` (the lifeline's, at the
    head of the group) or its `uv run`, told by their command lines."""
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if which == "guard" and argv[2:3] and argv[2].endswith(b"lifeline.py"):
            return pid
        if which == "uv run" and Path(os.fsdecode(argv[0])).name == "uv" and argv[1:2] == [b"run"]:
            return pid
    raise AssertionError(f"no {which} among {pids}")


def server_pids(logs: str) -> list[int]:
    """The pids the workspace entrypoints print at start-up (see workspace/rollouts/), from
    a run's logs.txt."""
    return [int(pid) for pid in re.findall(r"server pid (\d+): ", logs)]


def processes_in(folder: Path) -> list[int]:
    """The running processes whose working directory is `folder`: everything a launch starts
    (uv, the server, what the server starts) works in its rollout folder."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")) == folder:
                    found.append(int(entry.name))
            except OSError:  # gone meanwhile, a zombie, or not ours to look at
                pass
    return found
