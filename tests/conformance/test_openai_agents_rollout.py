"""An OpenAI Agents rollout on the OFFICIAL server, driven by `osmosis-tui eval --server`.

The rollout (`agents_workspace/rollouts/multiply-openai/main.py`) is written the way the
official `multiply-local-openai` template is: `OsmosisAgent` with the `OsmosisRolloutModel`
placeholder, one `OsmosisMemorySession`, `agents.Runner`. Its model calls go to the
`chat_completions_url` and `llm_api_key` the eval hands each rollout, i.e. the eval's model
gateway and its per-run bearer, and they stream. Started by hand here with the conformance
venv's Python on a free loopback port, as a user would, then driven by our CLI (the project's
own interpreter, `python -m tui`) without `ROLLOUT_LLM_API_KEY`: with no config the stub model
answers behind the gateway.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from core.eval.plan.config import load_config
from tests.conformance.venv import OFFLINE_ENV, venv_env
from tests.eval.runs.command import child_env, run_eval
from tests.eval.runs.files import read_jsonl, run_folder, summary_of
from tests.polling import eventually_sync

pytestmark = pytest.mark.conformance

WORKSPACE = Path(__file__).resolve().parent / "agents_workspace"
CONFIG = WORKSPACE / "configs" / "eval" / "multiply-openai.toml"
# Importing LiteLLM and the Agents SDK takes seconds, more on a busy machine.
SERVER_START_TIMEOUT_SEC = 90.0
SERVER_STOP_TIMEOUT_SEC = 15.0
EVAL_TIMEOUT_SEC = 180.0
HEALTH_READ_TIMEOUT_SEC = 2.0
HEALTH_POLL_INTERVAL_SEC = 0.2  # as the eval polls a launched server
LOG_TAIL_CHARS = 4000


def free_loopback_port() -> int:
    # Released before the server binds it: another process could take it in between, which
    # the start-up check reports as a server that exited before it was healthy.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-LOG_TAIL_CHARS:] if path.exists() else ""


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=HEALTH_READ_TIMEOUT_SEC).status_code == 200
    except httpx.HTTPError:
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (uvicorn runs the app's shutdown), then SIGKILL if it does not end in time."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=SERVER_STOP_TIMEOUT_SEC)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=SERVER_STOP_TIMEOUT_SEC)


@contextmanager
def official_rollout_server(
    python: Path, entrypoint: Path, workdir: Path
) -> Iterator[tuple[str, Path]]:
    """The rollout `entrypoint` (an official server) on a free loopback port; yields its URL
    and log file once `/health` answers, and stops it (by its own pid) when the block ends."""
    port = free_loopback_port()
    log_path = workdir / "rollout-server.log"
    env = venv_env(
        _OSMOSIS_ROLLOUT_PORT=str(port),
        # The LocalBackend's artifacts stay out of ~/.osmosis.
        _OSMOSIS_ROLLOUT_ARTIFACT_ROOT=str(workdir / "artifacts"),
    )
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(python), str(entrypoint)],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:

        def started() -> bool:
            if process.poll() is not None:
                pytest.fail(
                    f"the official rollout server exited with {process.returncode} before it "
                    f"was healthy:\n{_tail(log_path)}",
                    pytrace=False,
                )
            return _healthy(url)

        eventually_sync(
            started,
            f"{url}/health",
            timeout=SERVER_START_TIMEOUT_SEC,
            interval=HEALTH_POLL_INTERVAL_SEC,
        )
        yield url, log_path
    finally:
        _stop(process)


def test_openai_agents_rollout_streams_through_the_gateway_without_a_model_key(
    official_python: Path, tmp_path: Path
) -> None:
    # The workspace's eval config names the rollout and the dataset, as in the official layout.
    config = load_config(CONFIG)
    entrypoint = WORKSPACE / "rollouts" / config.rollout / config.entrypoint
    dataset = WORKSPACE / "data" / f"{config.dataset}.jsonl"
    rows = len(read_jsonl(dataset))
    assert rows > 0, dataset
    with official_rollout_server(official_python, entrypoint, tmp_path) as (url, server_log):
        # child_env drops ROLLOUT_LLM_API_KEY: the rollouts' key can only be the eval's own.
        # OFFLINE_ENV in case the eval loads LiteLLM (its price map would come from the net).
        result = run_eval(
            *("--server", url, "--dataset-file", str(dataset)),
            *("--headless", "--json", "--name", "agents"),
            cwd=tmp_path,
            env=child_env(**OFFLINE_ENV),
            timeout=EVAL_TIMEOUT_SEC,
        )
        logs = f"stderr:\n{result.stderr[-LOG_TAIL_CHARS:]}\nserver log:\n{_tail(server_log)}"
        assert result.returncode == 0, logs

    summary = summary_of(result.stdout)
    assert summary["status"] == "complete", logs
    assert summary["items"]["done"] == summary["items"]["ok"] == rows, logs
    assert summary["pass_rate"] == 1.0, logs

    folder = run_folder(tmp_path, "agents")
    events = read_jsonl(folder / "events.jsonl")
    assert len(events) == rows
    assert all(event["status"] == "success" for event in events), events
    assert all(event["reward"] == 1.0 for event in events), events
    assert all(event.get("tokens", 0) > 0 for event in events), events

    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["summary"]["tokens_used"] > 0, metrics
    assert metrics["summary"]["tokens_used"] == sum(event["tokens"] for event in events)

    calls = read_jsonl(folder / "calls.jsonl")
    assert {call["rollout_id"] for call in calls} == {event["rollout_id"] for event in events}
    assert all(call["streamed"] is True for call in calls), calls
    assert all(call["status"] == 200 for call in calls), calls
