"""The workspace launcher in-process (core/eval/servers/launcher.py, EVAL.md §5), on the real uv
and the fixture workspace: what it logs and tells, and what it does when the port, the rollout's
environment or the server's processes are not what it expects."""

from __future__ import annotations

import os
import platform
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from core.eval.servers import launcher
from core.eval.servers.launcher import LaunchError, launched_rollout_server
from core.serving.loopback import serve_in_loop
from server_stub import LocalBackend, create_rollout_server
from server_stub.demo import MultiplyWorkflow
from tests.eval.runs.command import launched_process, processes_in, rollout_pythonpath
from tests.polling import eventually

GREETING = {"WORKSPACE_GREETING": "hello"}


@pytest.fixture(autouse=True)
def rollouts_import_this_project(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture rollouts have no dependencies of their own (see their pyproject.toml)."""
    monkeypatch.setenv("PYTHONPATH", rollout_pythonpath())


@dataclass
class Launches:
    """What the launcher logged (`(step, line)`) and told the user."""

    lines: list[tuple[str, str]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    @asynccontextmanager
    async def server(
        self,
        workspace: Path,
        *,
        env: Mapping[str, str] = GREETING,
        secret_values: Mapping[str, str] | None = None,
    ) -> AsyncIterator[str]:
        async with (
            httpx.AsyncClient() as http,
            launched_rollout_server(
                workspace=workspace,
                rollout="multiply",
                entrypoint="main.py",
                env=env,
                secret_values=secret_values or {},
                artifact_root=workspace / "trials",
                log=lambda step, line: self.lines.append((step, line)),
                notice=self.notices.append,
                http_client=http,
                api_key=None,
            ) as url,
        ):
            yield url

    def step(self, step: str) -> list[str]:
        return [line for at, line in self.lines if at == step]


def rollout_dir(workspace: Path) -> Path:
    return (workspace / "rollouts" / "multiply").resolve()


pytestmark = pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="reads /proc")


async def test_a_launched_server_is_stopped_by_sigterm_and_leaves_nothing_behind(
    workspace: Path,
) -> None:
    launches = Launches()
    folder = rollout_dir(workspace)
    async with launches.server(workspace) as url, httpx.AsyncClient() as http:
        assert (await http.get(f"{url}/health")).status_code == 200
        running = processes_in(folder)
        assert len(running) >= 2, "uv run, and the server it started"
    assert processes_in(folder) == []
    port = url.rsplit(":", 1)[1]
    assert launches.step("deps")[0] == "syncing rollout dependencies (multiply)"
    assert f"rollout server healthy on port {port}" in launches.step("server")
    said = launches.step("rollout-server")
    assert said[0].endswith(": hello")  # "workspace server pid N: hello", from [env]
    assert said[-1].endswith(" stopped by SIGTERM")  # a graceful stop, not a SIGKILL
    assert launches.notices == [], "an environment without osmosis-ai is no version mismatch"


async def test_what_outlives_sigterm_is_killed_after_the_grace(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launcher, "STOP_GRACE_SEC", 1.0)
    entrypoint = rollout_dir(workspace) / "main.py"
    # The server starts a helper that ignores SIGTERM, then serves as usual: `uv run` and the
    # server stop, the helper does not, and must not be left behind.
    entrypoint.write_text(
        "import runpy, subprocess, sys\n"
        "helper = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        'signal.signal(signal.SIGTERM, signal.SIG_IGN); print("deaf", flush=True); '
        "time.sleep(600)'], stdout=subprocess.PIPE, text=True)\n"
        "assert helper.stdout is not None and helper.stdout.readline() == 'deaf\\n'\n"
        "runpy.run_path('server.py', run_name='__main__')\n"
    )
    (entrypoint.parent / "server.py").write_text(
        (Path(__file__).parent / "workspace" / "rollouts" / "multiply" / "main.py").read_text()
    )
    launches = Launches()
    async with launches.server(workspace):
        assert len(processes_in(entrypoint.parent)) >= 3, "uv run, the server, its helper"
    assert processes_in(entrypoint.parent) == []
    assert any(
        line.endswith("did not stop within 1 s of SIGTERM; killing it")
        for line in launches.step("server")
    )


async def test_a_killed_guard_is_taken_for_the_servers_end(workspace: Path) -> None:
    """Its group would outlive the eval: nothing else holds the lifeline. The group is killed
    at once, and the run finds its server gone (before, it went on serving, unguarded)."""
    launches = Launches()
    folder = rollout_dir(workspace)
    async with launches.server(workspace):
        launched = processes_in(folder)
        os.kill(launched_process(launched, "guard"), signal.SIGKILL)
        await eventually(lambda: processes_in(folder) == [], "the launched group to be killed")
    (said,) = [line for line in launches.step("server") if "its guard process ended" in line]
    assert said == (
        "uv: its guard process ended (status -9) while its process group lived on; "
        "the group is killed"
    )


async def test_a_foreign_server_on_the_port_is_a_clear_error(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entrypoint = rollout_dir(workspace) / "main.py"
    entrypoint.write_text("import time\nprint('slow to start', flush=True)\ntime.sleep(120)\n")
    foreign = create_rollout_server(
        backend=LocalBackend(workflow=MultiplyWorkflow), configure_logging=False
    )
    async with serve_in_loop(foreign) as url, httpx.AsyncClient() as http:
        theirs = (await http.get(f"{url}/health")).json()["instance_id"]
        monkeypatch.setattr(launcher, "free_port", lambda: int(url.rsplit(":", 1)[1]))
        launches = Launches()
        with pytest.raises(LaunchError) as refused:
            async with launches.server(workspace):
                pytest.fail("the foreign server was taken for the launched one")
    assert str(refused.value) == (
        f"another process is already listening on {url} and its /health reports "
        f"instance_id={theirs!r} instead of this run's; stop it and run again"
    )
    assert processes_in(entrypoint.parent) == [], "the launched server was stopped"


async def test_another_osmosis_ai_in_the_rollout_environment_is_warned_about(
    workspace: Path, tmp_path: Path
) -> None:
    # What the server would import: here an osmosis-ai 0.2.0 on the PYTHONPATH of [env].
    fake = tmp_path / "site" / "osmosis_ai-0.2.0.dist-info"
    fake.mkdir(parents=True)
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: osmosis-ai\nVersion: 0.2.0\n")
    pythonpath = os.pathsep.join([str(fake.parent), rollout_pythonpath()])
    launches = Launches()
    async with launches.server(workspace, env={**GREETING, "PYTHONPATH": pythonpath}):
        pass
    assert launches.notices == [
        "rollouts/multiply uses osmosis-ai 0.2.0, but osmosis-tui is tested against 0.3.8; if "
        "the run misbehaves, require osmosis-ai==0.3.8 in rollouts/multiply/pyproject.toml "
        "and run uv sync --project rollouts/multiply"
    ]


async def test_a_failed_uv_sync_says_why_and_starts_nothing(workspace: Path) -> None:
    pyproject = rollout_dir(workspace) / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('">=3.10"', '">=99"'))
    launches = Launches()
    with pytest.raises(LaunchError) as failed:
        async with launches.server(workspace):
            pytest.fail("started without its environment")
    message = str(failed.value)
    assert message.startswith("uv sync failed for rollouts/multiply with exit code 2: ")
    assert "No interpreter found for Python >=99" in message  # uv's last line
    assert message.endswith("; its output is in logs.txt")
    assert any("No interpreter found" in line for line in launches.step("deps"))
    assert launches.step("rollout-server") == []


async def test_a_failed_uv_sync_is_told_by_its_error_line_not_its_last(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Python on PATH that cannot run (a pyenv shim for a version pyenv was not told to use):
    uv's error names it, and the interpreter's own stderr follows, ending with a line that
    says nothing of the failure."""
    pyproject = rollout_dir(workspace) / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('">=3.10"', '">=3.99"'))
    shims = tmp_path / "shims"
    shims.mkdir()
    shim = shims / "python3.99"
    shim.write_text(
        "#!/bin/sh\necho 'shim: python3.99: command not found' >&2\n"
        "echo 'Note: see the manager for versions found at the same time.' >&2\nexit 127\n"
    )
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:/usr/bin:/bin")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    launches = Launches()
    with pytest.raises(LaunchError) as failed:
        async with launches.server(workspace):
            pytest.fail("started without its environment")
    message = str(failed.value)
    assert message.startswith(
        "uv sync failed for rollouts/multiply with exit code 2: Failed to inspect Python "
        f"interpreter from first executable in the search path at `{shim}`"
    ), message
    assert "at the same time" not in message
    assert "fits its requires-python" not in message  # nothing installed fits >=3.99
    assert any("at the same time" in line for line in launches.step("deps"))  # in logs.txt


async def test_a_failed_uv_sync_offers_an_installed_python_that_fits(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale `.python-version` pin asks for a Python that is not there, while this one fits
    the rollout's requires-python: the failure says which, and how to use it, and that works."""
    (rollout_dir(workspace) / ".python-version").write_text("3.99\n")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no pyenv shims: uv's error is about 3.99
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    with pytest.raises(LaunchError) as failed:
        async with Launches().server(workspace):
            pytest.fail("started without its environment")
    message = str(failed.value)
    assert "No interpreter found for Python 3.99" in message
    assert (
        f"; Python {platform.python_version()} at {sys.executable} fits its requires-python: "
        f"run with UV_PYTHON={sys.executable}, or make its environment with it once: "
        f"uv sync --project rollouts/multiply --python {sys.executable}; "
    ) in message
    monkeypatch.setenv("UV_PYTHON", sys.executable)
    async with Launches().server(workspace) as url:
        assert url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize("where", ["env", "secrets"])
async def test_the_config_cannot_set_what_the_launcher_sets(workspace: Path, where: str) -> None:
    owned = {"PYTHONUNBUFFERED": "0"}
    launches = Launches()
    with pytest.raises(LaunchError, match=r"^\[env\]/\[secrets\] must not set PYTHONUNBUFFERED"):
        async with launches.server(
            workspace,
            env={**GREETING, **owned} if where == "env" else GREETING,
            secret_values=owned if where == "secrets" else None,
        ):
            pytest.fail("started with a variable the launcher owns overridden")
