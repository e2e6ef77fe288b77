"""Starting and stopping OFFICIAL osmosis-ai 0.3.8 rollout servers (`official_server_entry.py`)
as subprocesses of a test, in the Python 3.12 conformance venv."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conformance.venv import venv_env

ENTRY = Path(__file__).resolve().with_name("official_server_entry.py")
SERVER_START_TIMEOUT_SEC = 60.0
SERVER_STOP_TIMEOUT_SEC = 15.0


@dataclass
class OfficialServer:
    group: str
    url: str
    artifact_root: Path
    log_path: Path


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM (uvicorn runs the app's shutdown), then SIGKILL if it does not finish."""
    if process.returncode is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), SERVER_STOP_TIMEOUT_SEC)
    except asyncio.TimeoutError:  # not the builtin on Python 3.10
        process.kill()
        await process.wait()


@asynccontextmanager
async def official_server(
    python: Path,
    group: str,
    options: list[str],
    workdir: Path,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[OfficialServer]:
    """Start the official server entrypoint; yields once it printed `READY <port>`.

    `env` is added to the venv's environment (`venv_env`); the server's artifacts go to
    `<workdir>/<group>-artifacts`, its stderr to `<workdir>/<group>-server.log`. Leaving the
    block stops it the way a supervisor does (SIGTERM), so its shutdown runs.
    """
    artifact_root = workdir / f"{group}-artifacts"
    log_path = workdir / f"{group}-server.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            str(python),
            str(ENTRY),
            *options,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            cwd=workdir,
            env=venv_env(_OSMOSIS_ROLLOUT_ARTIFACT_ROOT=str(artifact_root), **(env or {})),
        )
    try:
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), SERVER_START_TIMEOUT_SEC)
        except asyncio.TimeoutError:
            line = b""
        match = re.fullmatch(rb"READY (\d+)\s*", line)
        if match is None:
            await _stop(process)
            pytest.fail(
                f"official server {group!r} did not start (got {line!r}):\n"
                f"{log_path.read_text(errors='replace')[-4000:]}",
                pytrace=False,
            )
        yield OfficialServer(
            group=group,
            url=f"http://127.0.0.1:{int(match.group(1))}",
            artifact_root=artifact_root,
            log_path=log_path,
        )
    finally:
        await _stop(process)
