"""Starting a workspace's own rollout server as a child process (EVAL.md §5).

`uv sync` prepares the rollout's environment from its `pyproject.toml`, then the entrypoint
runs there under `uv run`, in a process group of its own, until the run is over. The command
lines and the environment uv gets are in `uv_project`; this module runs them, each under the
guard of `lifeline`, which stops the group when the eval dies without stopping it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from core.eval.errors import EvalError, InputError
from core.eval.servers.lifeline import guarded_command
from core.eval.servers.uv_project import (
    TESTED_OSMOSIS_AI,
    find_uv,
    fitting_interpreter,
    server_command,
    sync_command,
    uv_environment,
    version_probe_command,
)
from core.task_end import cancel_and_wait
from core.types import SECRET_NAMES_ENV

# A refused connection costs well under a millisecond, and every poll the server is healthy
# before delays the first rollout: at 0.2 s, by 0.1 s on average.
HEALTH_POLL_SEC = 0.05
STARTUP_TIMEOUT_SEC = 90.0
STOP_GRACE_SEC = 5.0
STOP_POLL_SEC = 0.05
# How often a child's guard is looked at: its end while its group lives on (it was killed) is
# noticed within this, and the group killed.
GUARD_POLL_SEC = 0.2
# After a child's group is gone, how long its last output may take to be read.
OUTPUT_DRAIN_SEC = 2.0
VERSION_PROBE_TIMEOUT_SEC = 10.0
# Output of a child is read this much at a time; a longer line is logged in pieces.
OUTPUT_CHUNK = 1 << 16
# A server's /health may carry its instance in this header (the official launcher's bootstrap
# adds it); else the body's `instance_id` says it.
INSTANCE_HEADER = "x-osmosis-rollout-instance-id"

# How uv begins the line that says why it failed.
ERROR_PREFIX = "error:"

# logs.txt steps, as the official tool names them.
DEPS_STEP = "deps"
SERVER_STEP = "server"
OUTPUT_STEP = "rollout-server"

LaunchLog = Callable[[str, str], None]
"""Writes one line to the run's log: `(step, message)`. A launch's `stage` has the same shape:
it says a step begins ("syncing rollout dependencies (multiply)"), as the official CLI narrates
its steps, and writes it to the log too."""


# Process groups (each led by a child started here) not yet stopped.
_running: set[int] = set()


def kill_launched_servers() -> None:
    """SIGKILL every child started here that still runs (a rollout server, a `uv sync`): for
    an exit that cannot wait for the graceful stop (a second Ctrl-C), and must not leave them
    behind."""
    for group in _running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)


class LaunchError(EvalError, RuntimeError):
    """A rollout server the eval starts (the workspace's, the demo's) could not be started
    (the message says why)."""


def resolve_entrypoint(workspace: Path, rollout: str, entrypoint: str) -> tuple[Path, Path]:
    """The rollout folder and entrypoint file; never anything outside `rollouts/<rollout>/`.

    The folder must be a uv project: its `pyproject.toml` says what the server needs. (Without
    one, `uv --project` would look in the folders above and sync whatever project it found.)
    """
    rollouts = (workspace / "rollouts").resolve()
    rollout_dir = (rollouts / rollout).resolve()
    target = (rollout_dir / entrypoint).resolve()
    if rollout_dir.parent != rollouts or not target.is_relative_to(rollout_dir):
        raise LaunchError(
            f"rollout {rollout!r} / entrypoint {entrypoint!r} leave rollouts/{rollout}/"
        )
    if not target.is_file():
        raise LaunchError(f"entrypoint not found: {target}")
    if not (rollout_dir / "pyproject.toml").is_file():
        raise LaunchError(
            f"rollouts/{rollout}/pyproject.toml not found: the rollout server runs in the "
            f"environment uv builds from it (uv sync --project rollouts/{rollout})"
        )
    return rollout_dir, target


def free_port() -> int:
    """A loopback port free right now, for the child to bind (`_OSMOSIS_ROLLOUT_PORT`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _refuse_port_in_use(port: int) -> None:
    """`--rollout-port` tried before the launch: a port something else holds is the user's to
    change (`InputError`, exit 2), not a server that failed to start, found after `uv sync`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the server binds it (uvicorn sets SO_REUSEADDR): a port held only by a closed
        # connection waiting out TIME_WAIT is free for it.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            state = "is in use" if exc.errno == errno.EADDRINUSE else "cannot be bound"
            raise InputError.single(
                "--rollout-port",
                f"port {port} {state} on 127.0.0.1 ({exc.strerror}): stop what holds it, or "
                "leave the flag out for a free port",
            ) from None


# What the launcher sets for the server, last: a config must not move the port, the artifacts,
# the instance marker or which variables are secret, so [env] and [secrets] may not name them.
LAUNCHER_OWNED_ENV = (
    "_OSMOSIS_ROLLOUT_PORT",
    "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT",
    "_OSMOSIS_ROLLOUT_INSTANCE_ID",
    "PYTHONUNBUFFERED",
    SECRET_NAMES_ENV,
)


def _refuse_owned_names(config_env: Mapping[str, str], secret_values: Mapping[str, str]) -> None:
    taken = sorted(set(LAUNCHER_OWNED_ENV) & (config_env.keys() | secret_values.keys()))
    if taken:
        raise LaunchError(
            f"[env]/[secrets] must not set {', '.join(taken)}: the launcher sets them"
        )


def _server_environment(
    uv_env: Mapping[str, str],
    config_env: Mapping[str, str],
    secret_values: Mapping[str, str],
    *,
    port: int,
    artifact_root: Path,
    instance_id: str,
    feeds: Mapping[str, str],
) -> dict[str, str]:
    """uv's environment, then the feeds' variables, then `[env]` (a workspace that sends its
    events to a collector of its own keeps doing so), then the secrets, then what the
    launcher owns."""
    owned = {
        "_OSMOSIS_ROLLOUT_PORT": str(port),
        # Absolute: the child runs in the rollout folder, not in our working directory.
        "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(artifact_root.absolute()),
        "_OSMOSIS_ROLLOUT_INSTANCE_ID": instance_id,
        # Its output reaches logs.txt as it is written, not when a buffer fills.
        "PYTHONUNBUFFERED": "1",
        # Which values it must mask in its previews (server_stub does; official servers ignore it).
        SECRET_NAMES_ENV: ",".join(sorted(secret_values)),
    }
    return {**uv_env, **feeds, **config_env, **secret_values, **owned}


@asynccontextmanager
async def launched_rollout_server(
    *,
    workspace: Path,
    rollout: str,
    entrypoint: str,
    env: Mapping[str, str],
    secret_values: Mapping[str, str],
    artifact_root: Path,
    log: LaunchLog,
    notice: Callable[[str], None],
    http_client: httpx.AsyncClient,
    api_key: str | None,
    port: int | None = None,
    feeds: Mapping[str, str] | None = None,
    stage: LaunchLog | None = None,
) -> AsyncIterator[str]:
    """Sync the rollout's environment, start its entrypoint there on `port` (None: a free
    one), wait for its /health (sending `api_key` as the bearer, if any), yield its URL, and
    stop it afterwards.

    `feeds` are the variables that turn on the server's ownership events and previews
    (PROTOCOL.md §8), pointing them at the run's receiver and previews folder.

    `notice` gets what the user should see besides the log (an osmosis-ai version other than
    the tested one); `stage` each step as it begins (default: `log`).
    """
    stage = stage or log
    rollout_dir, target = resolve_entrypoint(workspace, rollout, entrypoint)
    _refuse_owned_names(env, secret_values)
    uv = find_uv()
    if uv is None:
        raise LaunchError(
            f"uv is required to launch the rollout server from rollouts/{rollout}/"
            "pyproject.toml; install uv (pip install uv) and retry"
        )
    uv_env = uv_environment(rollout_dir, os.environ)
    if port is not None:
        _refuse_port_in_use(port)
    await _sync(uv, rollout_dir, uv_env, rollout, log=log, stage=stage)
    port = free_port() if port is None else port
    instance_id = secrets.token_hex(16)
    server_env = _server_environment(
        uv_env,
        env,
        secret_values,
        port=port,
        artifact_root=artifact_root,
        instance_id=instance_id,
        feeds=feeds or {},
    )
    # Read while the server starts (both are a Python starting in that environment): the
    # answer is only ever a notice, and it usually comes long before the server is healthy.
    version_check = asyncio.ensure_future(
        _check_osmosis_version(
            uv, rollout_dir, server_env=server_env, rollout=rollout, log=log, notice=notice
        )
    )
    try:
        command = server_command(uv, rollout_dir, target)
        log(SERVER_STEP, f"rollout server command: {' '.join(command)}")
        stage(SERVER_STEP, f"starting rollout server ({entrypoint}) on port {port}")
        url = f"http://127.0.0.1:{port}"
        async with _child(
            command,
            cwd=rollout_dir,
            env=server_env,
            on_line=lambda line: log(OUTPUT_STEP, line),
            log=log,
        ) as server:
            await _wait_healthy(server, http_client, url, instance_id, api_key)
            stage(SERVER_STEP, f"rollout server healthy on port {port}")
            await version_check  # bounded by its own timeout
            yield url
    finally:
        await cancel_and_wait(version_check)  # raised above already, or the launch failed


async def _sync(
    uv: str,
    rollout_dir: Path,
    uv_env: Mapping[str, str],
    rollout: str,
    *,
    log: LaunchLog,
    stage: LaunchLog,
) -> None:
    """`uv sync`, its output logged under `deps`. No deadline: installing may take long, and
    an interrupt ends it."""
    stage(DEPS_STEP, f"syncing rollout dependencies ({rollout})")
    async with _child(
        sync_command(uv, rollout_dir),
        cwd=rollout_dir,
        env=uv_env,
        on_line=lambda line: log(DEPS_STEP, line),
        log=log,
    ) as sync:
        code = await sync.process.wait()
    if code != 0:
        # uv says what failed in its `error:` line; what follows it is detail (a cause, the
        # stderr of an interpreter it could not run), whose last line says little.
        why = sync.first_error or sync.last_line
        raise LaunchError(
            f"uv sync failed for rollouts/{rollout} with exit code {code}: {why}"
            # Only when it found no Python to use: another one does not mend a dependency.
            + (_interpreter_offer(rollout_dir, uv_env, rollout) if "interpreter" in why else "")
            + "; its output is in logs.txt"
        )


def _interpreter_offer(rollout_dir: Path, uv_env: Mapping[str, str], rollout: str) -> str:
    """For a failed `uv sync`: an installed Python that fits the rollout, and how to use it
    (uv keeps a `UV_PYTHON` the user set, and an environment once made); else nothing."""
    found = fitting_interpreter(rollout_dir, uv_env)
    if found is None or uv_env.get("UV_PYTHON") == found[1]:
        return ""  # none fits, or uv was given that one and failed all the same
    version, path = found
    return (
        f"; Python {version} at {path} fits its requires-python: run with UV_PYTHON={path}, "
        f"or make its environment with it once: uv sync --project rollouts/{rollout} "
        f"--python {path}"
    )


async def _check_osmosis_version(
    uv: str,
    rollout_dir: Path,
    *,
    server_env: Mapping[str, str],
    rollout: str,
    log: LaunchLog,
    notice: Callable[[str], None],
) -> None:
    """Warn when the rollout's environment holds an osmosis-ai other than the tested one.

    Asked of the environment itself, with the server's own variables (a `PYTHONPATH` in
    `[env]` counts): what the server will import, wherever it is installed. An environment
    without osmosis-ai (a rollout on another server library) gets no warning.
    """
    version_lines: list[str] = []
    async with _child(
        version_probe_command(uv, rollout_dir),
        cwd=rollout_dir,
        env=server_env,
        on_line=version_lines.append,
        log=log,
    ) as probe:
        try:
            code: int | None = await asyncio.wait_for(
                probe.process.wait(), VERSION_PROBE_TIMEOUT_SEC
            )
        except asyncio.TimeoutError:  # not the builtin TimeoutError on Python 3.10
            code = None
    version = version_lines[-1].strip() if code == 0 and version_lines else None
    if code != 0:
        why = "no answer in time" if code is None else f"exit code {code}"
        log(SERVER_STEP, f"could not read its osmosis-ai version ({why}): {probe.last_line}")
    elif version and version != TESTED_OSMOSIS_AI:
        notice(
            f"rollouts/{rollout} uses osmosis-ai {version}, but osmosis-tui is tested against "
            f"{TESTED_OSMOSIS_AI}; if the run misbehaves, require osmosis-ai=="
            f"{TESTED_OSMOSIS_AI} in rollouts/{rollout}/pyproject.toml and run "
            f"uv sync --project rollouts/{rollout}"
        )


@dataclass
class _Child:
    process: asyncio.subprocess.Process
    last_line: str = ""
    """The last non-empty line it printed, for an error message."""
    first_error: str = ""
    """Its first `error: ...` line without the prefix (uv's own account of a failure)."""


@asynccontextmanager
async def _child(
    command: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    on_line: Callable[[str], None],
    log: LaunchLog,
) -> AsyncIterator[_Child]:
    """Run `command` in a process group of its own (so that stopping it stops what it started,
    `uv run`'s Python included), its output (stderr too) passed on line by line; stopped when
    the block ends, however it ends, and by its guard when this process ends without stopping
    it (`lifeline`). After the block every line has been read (unless a process that left the
    group still holds the output)."""
    # The guard holds the read end; this process holds the only write end until the child is
    # stopped, so its end, however it comes (SIGKILL too), is the guard's EOF.
    read_end, write_end = os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            *guarded_command(command, read_end, grace_sec=STOP_GRACE_SEC),
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            pass_fds=(read_end,),
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    _running.add(process.pid)
    child = _Child(process)

    def line(text: str) -> None:
        if text.strip():
            child.last_line = text.strip()
            if not child.first_error and text.startswith(ERROR_PREFIX):
                child.first_error = text.removeprefix(ERROR_PREFIX).strip()
        on_line(text)

    pump = asyncio.create_task(_pump_output(process, line))
    guard = asyncio.create_task(_guard_ended(process, command, log))
    try:
        yield child
    finally:
        await cancel_and_wait(guard)
        try:
            await _stop(process, lambda message: log(SERVER_STEP, message))
        finally:
            _running.discard(process.pid)
            os.close(write_end)  # a stop cut short still ends with the group: the guard sees EOF
        try:
            await asyncio.wait_for(pump, OUTPUT_DRAIN_SEC)
        except asyncio.TimeoutError:
            # Its group is gone, yet its output is still open: something it started left the
            # group (a daemon) and holds it. The run must not wait for that.
            log(SERVER_STEP, f"{Path(command[0]).name}: output still open after it stopped")


async def _guard_ended(
    process: asyncio.subprocess.Process, command: list[str], log: LaunchLog
) -> None:
    """The guard leads the child's group and ends once the group is empty: a guard that
    ends while its group lives on was killed, and nothing would stop the group when this
    process dies. It is taken for the end of the group: what is left of it is killed (a
    server's pool then finds the server gone)."""
    # Polled, as no event says it: `process.wait()` also waits for the child's output to
    # close, and what is left of the group holds it open.
    while process.returncode is None:  # noqa: ASYNC110
        await asyncio.sleep(GUARD_POLL_SEC)
    if _signal_group(process.pid, signal.SIGKILL):
        log(
            SERVER_STEP,
            f"{Path(command[0]).name}: its guard process ended (status {process.returncode}) "
            "while its process group lived on; the group is killed",
        )


async def _pump_output(process: asyncio.subprocess.Process, on_line: Callable[[str], None]) -> None:
    """Pass on the child's output line by line, and keep reading whatever it writes: a child
    that cannot write blocks. Chunks, not `readline`: an over-long line must not end the pump."""
    assert process.stdout is not None
    partial = b""
    while chunk := await process.stdout.read(OUTPUT_CHUNK):
        *lines, partial = (partial + chunk).split(b"\n")
        if len(partial) >= OUTPUT_CHUNK:
            lines.append(partial)
            partial = b""
        for line in lines:
            on_line(line.decode("utf-8", "replace").rstrip())
    if partial:
        on_line(partial.decode("utf-8", "replace").rstrip())


async def _wait_healthy(
    server: _Child,
    http: httpx.AsyncClient,
    url: str,
    instance_id: str,
    api_key: str | None,
) -> None:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + STARTUP_TIMEOUT_SEC
    while time.monotonic() < deadline:
        if server.process.returncode is not None:
            raise LaunchError(
                f"the rollout server exited with status {server.process.returncode} before it "
                f"was healthy: {server.last_line}; its output is in logs.txt"
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
            body = _json_object(response)
            if response.status_code < 400 and body is not None:
                answered = response.headers.get(INSTANCE_HEADER, body.get("instance_id"))
                if answered == instance_id:
                    return
                raise LaunchError(
                    f"another process is already listening on {url} and its /health reports "
                    f"instance_id={answered!r} instead of this run's; stop it and run again"
                )
        await asyncio.sleep(HEALTH_POLL_SEC)
    raise LaunchError(
        f"the rollout server was not healthy within {STARTUP_TIMEOUT_SEC:.0f} s; "
        "its output is in logs.txt"
    )


def _json_object(response: httpx.Response) -> dict[str, object] | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def _stop(process: asyncio.subprocess.Process, log: Callable[[str], None]) -> None:
    """SIGTERM the child's process group, SIGKILL what is left of it after the grace.

    The whole group, also when its leader already ended: `uv run` may be gone while the
    Python it started still runs.
    """
    group = process.pid
    if not _signal_group(group, signal.SIGTERM):
        await process.wait()
        return
    deadline = time.monotonic() + STOP_GRACE_SEC
    while time.monotonic() < deadline:
        if process.returncode is not None and not _signal_group(group, 0):
            return
        await asyncio.sleep(STOP_POLL_SEC)
    log(f"process group {group} did not stop within {STOP_GRACE_SEC:g} s of SIGTERM; killing it")
    _signal_group(group, signal.SIGKILL)
    await process.wait()


def _signal_group(group: int, signum: int) -> bool:
    """Send `signum` (0: none, only look) to the group; False when nothing of it is left."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    return True
