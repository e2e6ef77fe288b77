"""Starting a workspace's own rollout server as a child process (EVAL.md §5)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from core.eval.errors import EvalError

HEALTH_POLL_SEC = 0.2
STARTUP_TIMEOUT_SEC = 90.0
STOP_GRACE_SEC = 5.0
# Output of the child is read this much at a time; a longer line is logged in pieces.
OUTPUT_CHUNK = 1 << 16


# Process groups (led by the child) of the rollout servers started here and not yet stopped.
_running: set[int] = set()


def kill_launched_servers() -> None:
    """SIGKILL every launched rollout server still running: for an exit that cannot wait for
    the graceful stop (a second Ctrl-C), and must not leave them behind."""
    for group in _running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)


class LaunchError(EvalError, RuntimeError):
    """The workspace rollout server could not be started (the message says why)."""


def rollout_command(rollout_dir: Path, entrypoint: str) -> list[str]:
    """`uv run` when the rollout is a uv project and uv is installed, else this interpreter."""
    uv = shutil.which("uv")
    if uv is not None and (rollout_dir / "pyproject.toml").is_file():
        return [uv, "run", "--project", str(rollout_dir), "python", entrypoint]
    return [sys.executable, entrypoint]


def resolve_entrypoint(workspace: Path, rollout: str, entrypoint: str) -> tuple[Path, Path]:
    """The rollout folder and entrypoint file; never anything outside `rollouts/<rollout>/`."""
    rollouts = (workspace / "rollouts").resolve()
    rollout_dir = (rollouts / rollout).resolve()
    target = (rollout_dir / entrypoint).resolve()
    if rollout_dir.parent != rollouts or not target.is_relative_to(rollout_dir):
        raise LaunchError(
            f"rollout {rollout!r} / entrypoint {entrypoint!r} leave rollouts/{rollout}/"
        )
    if not target.is_file():
        raise LaunchError(f"entrypoint not found: {target}")
    return rollout_dir, target


def free_port() -> int:
    """A loopback port free right now, for the child to bind (`_OSMOSIS_ROLLOUT_PORT`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _child_environment(
    env: dict[str, str], port: int, artifact_root: Path, instance_id: str
) -> dict[str, str]:
    return {
        **os.environ,
        **env,
        "_OSMOSIS_ROLLOUT_PORT": str(port),
        # Absolute: the child runs in the rollout folder, not in our working directory.
        "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(artifact_root.absolute()),
        "_OSMOSIS_ROLLOUT_INSTANCE_ID": instance_id,
    }


@asynccontextmanager
async def launched_rollout_server(
    *,
    workspace: Path,
    rollout: str,
    entrypoint: str,
    env: dict[str, str],
    artifact_root: Path,
    log: Callable[[str], None],
    http_client: httpx.AsyncClient,
    api_key: str | None,
) -> AsyncIterator[str]:
    """Start the entrypoint, wait for its /health (sending `api_key` as the bearer, if any),
    yield its URL, and stop it afterwards."""
    rollout_dir, target = resolve_entrypoint(workspace, rollout, entrypoint)
    port = free_port()
    instance_id = secrets.token_hex(16)
    child_env = _child_environment(env, port, artifact_root, instance_id)
    command = rollout_command(rollout_dir, str(target.relative_to(rollout_dir)))
    log(f"starting rollout server: {' '.join(command)} (port {port}, cwd {rollout_dir})")
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=rollout_dir,
        env=child_env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group, so stopping it stops its children too
    )
    _running.add(process.pid)
    pump = asyncio.create_task(_pump_output(process, log))
    url = f"http://127.0.0.1:{port}"
    try:
        await _wait_healthy(process, http_client, url, instance_id, api_key)
        log(f"rollout server ready at {url}")
        yield url
    finally:
        await _stop(process, log)
        _running.discard(process.pid)
        await pump


async def _pump_output(process: asyncio.subprocess.Process, log: Callable[[str], None]) -> None:
    """Log the child's output line by line, and keep reading whatever it writes: a child that
    cannot write blocks. Chunks, not `readline`: an over-long line must not end the pump."""
    assert process.stdout is not None
    partial = b""
    while chunk := await process.stdout.read(OUTPUT_CHUNK):
        *lines, partial = (partial + chunk).split(b"\n")
        if len(partial) >= OUTPUT_CHUNK:
            lines.append(partial)
            partial = b""
        for line in lines:
            log("server: " + line.decode("utf-8", "replace").rstrip())
    if partial:
        log("server: " + partial.decode("utf-8", "replace").rstrip())


async def _wait_healthy(
    process: asyncio.subprocess.Process,
    http: httpx.AsyncClient,
    url: str,
    instance_id: str,
    api_key: str | None,
) -> None:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + STARTUP_TIMEOUT_SEC
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise LaunchError(
                f"the rollout server exited with status {process.returncode} before it was "
                "healthy; its output is in logs.txt"
            )
        try:
            response = await http.get(f"{url}/health", headers=headers, timeout=2.0)
        except httpx.HTTPError:
            pass
        else:
            if response.status_code in (401, 403):
                raise LaunchError(
                    f"the rollout server refused /health (HTTP {response.status_code}); give "
                    "it its key with --server-api-key (or $OSMOSIS_ROLLOUT_SERVER_API_KEY)"
                )
            if response.status_code == 200:
                if _instance_of(response) == instance_id:
                    return
                raise LaunchError(f"another process answers on {url} (its instance_id is not ours)")
        await asyncio.sleep(HEALTH_POLL_SEC)
    raise LaunchError(f"the rollout server was not healthy within {STARTUP_TIMEOUT_SEC:.0f} s")


def _instance_of(response: httpx.Response) -> object:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("instance_id") if isinstance(body, dict) else None


async def _stop(process: asyncio.subprocess.Process, log: Callable[[str], None]) -> None:
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        await asyncio.wait_for(process.wait(), STOP_GRACE_SEC)
    except asyncio.TimeoutError:  # not the builtin TimeoutError on Python 3.10
        log(f"rollout server did not stop within {STOP_GRACE_SEC:.0f} s; killing it")
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        await process.wait()
