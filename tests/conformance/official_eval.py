"""What the results-folder conformance tests run: the official `osmosis eval run` and upload
check in the conformance venv, our `osmosis-tui eval`, an official rollout server, the stub
model, and a workspace in the official layout.

Everything listens on loopback only. The official CLI's model is the stub, reached as LiteLLM
reaches any OpenAI-compatible server: `model_path = "openai/..."` plus `OPENAI_API_BASE`.
Its launcher runs `uv sync` on the workspace's rollout, which installs osmosis-ai 0.3.8 there
from the package index (or uv's cache) with the interpreter of the conformance venv, never one
uv would download.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.eval.servers.launcher import free_port
from tests.conformance.venv import find_python312, venv_env
from tests.eval.runs.command import SECRET_ENV, child_env, osmosis
from tests.polling import eventually_sync

HERE = Path(__file__).resolve().parent
WORKSPACE = HERE / "results_workspace"
CONFIG = "configs/eval/judge.toml"
DATASET = "data/judge.jsonl"
EVALS = Path(".osmosis") / "evals"
# Any key will do for the stub; LiteLLM refuses to call without one.
MODEL_KEY = "sk-conformance-stub-key"

RUN_TIMEOUT_SEC = 600.0  # the first `uv sync` may download osmosis-ai and its dependencies
START_TIMEOUT_SEC = 90.0
STOP_TIMEOUT_SEC = 15.0
LOG_TAIL_CHARS = 4000


def official_env(python: Path, **extra: str) -> dict[str, str]:
    """The environment of an official program run by the conformance venv's `python`: the
    venv's own (`venv_env`), its `bin/` first on PATH (where `uv` is), uv on the venv's
    interpreter, none of our eval's secrets."""
    env = venv_env(
        PATH=f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        UV_PYTHON=find_python312(),
        UV_PYTHON_DOWNLOADS="never",
        **extra,
    )
    for name in ("VIRTUAL_ENV", *SECRET_ENV):
        env.pop(name, None)
    return env


def make_workspace(target: Path, files: Mapping[str, str] | None = None) -> Path:
    """A copy of `results_workspace/` at `target`, with `files` (path in the workspace: text)
    written over it, committed to a fresh git repository (as a Platform workspace is one), so
    both tools record the same git provenance."""
    shutil.copytree(WORKSPACE, target, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in (files or {}).items():
        (target / name).write_text(text, encoding="utf-8")
    identity = ["-c", "user.name=conformance", "-c", "user.email=conformance@localhost"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*identity, "commit", "-qm", "ws"]):
        subprocess.run(["git", "-C", str(target), *args], check=True, capture_output=True)
    return target


def _tail(text: str) -> str:
    return text[-LOG_TAIL_CHARS:]


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_SEC)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_SEC)


@contextmanager
def _served(argv: list[str], health: str, env: dict[str, str], log: Path) -> Iterator[None]:
    """`argv` running until the block ends (stopped by its own pid), once `health` answers."""
    with log.open("wb") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:

        def started() -> bool:
            if process.poll() is not None:
                pytest.fail(
                    f"{argv[-1]} exited with {process.returncode}:\n{_tail(log.read_text())}",
                    pytrace=False,
                )
            return _healthy(health)

        eventually_sync(started, health, timeout=START_TIMEOUT_SEC, interval=0.2)
        yield
    finally:
        _stop(process)


_STUB_MODEL = """
import sys, uvicorn
from server_stub.llm import create_chat_app
uvicorn.run(create_chat_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


@contextmanager
def stub_model(
    log: Path, program: Sequence[str] = ("-c", _STUB_MODEL), *, args: Sequence[str] = ()
) -> Iterator[str]:
    """`server_stub.llm`'s stub model on a free loopback port; yields its `/v1` base URL.
    `program` is what Python runs, given the port and then `args`: by default the stub as it
    is (another program may put something before it, as tests/compare/planned_model.py does)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # No /health route: a GET on the chat path answers 405 once it listens.
    probe = f"{url}/v1/chat/completions"
    argv = [sys.executable, *program, str(port), *args]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, env=child_env(), stdout=out, stderr=subprocess.STDOUT)
    try:

        def listening() -> bool:
            if process.poll() is not None:
                pytest.fail(f"the stub model exited:\n{_tail(log.read_text())}", pytrace=False)
            try:
                httpx.get(probe, timeout=2.0)
            except httpx.HTTPError:
                return False
            return True

        eventually_sync(listening, probe, timeout=START_TIMEOUT_SEC, interval=0.2)
        yield f"{url}/v1"
    finally:
        _stop(process)


@contextmanager
def official_rollout_server(
    python: Path, workspace: Path, artifact_root: Path, env: dict[str, str], log: Path
) -> Iterator[str]:
    """The workspace's rollout (an official 0.3.8 server) started by hand, as a user runs one
    for `osmosis-tui eval --server`, writing its trials under `artifact_root`; yields its URL."""
    port = free_port()
    server_env = official_env(
        python,
        _OSMOSIS_ROLLOUT_PORT=str(port),
        _OSMOSIS_ROLLOUT_ARTIFACT_ROOT=str(artifact_root),
        **env,
    )
    entrypoint = workspace / "rollouts" / "judge" / "main.py"
    url = f"http://127.0.0.1:{port}"
    with _served([str(python), str(entrypoint)], f"{url}/health", server_env, log):
        yield url


def run_official_eval(
    python: Path, workspace: Path, model_url: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """`osmosis eval run CONFIG --dataset-file DATASET -y --json ARGS` in `workspace`."""
    env = official_env(python, OPENAI_API_BASE=model_url, OPENAI_API_KEY=MODEL_KEY)
    return subprocess.run(
        [
            *(str(python.parent / "osmosis"), "eval", "run", CONFIG),
            *("--dataset-file", DATASET, "-y", "--json", *args),
        ],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SEC,
        check=False,
    )


def run_our_eval(workspace: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`osmosis-tui eval CONFIG --dataset-file DATASET --headless --json ARGS` in `workspace`,
    by this project's interpreter (the code under test)."""
    return subprocess.run(
        osmosis("eval", CONFIG, "--dataset-file", DATASET, "--headless", "--json", *args),
        cwd=workspace,
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SEC,
        check=False,
    )


_UPLOAD_PLAN = """
import json, sys
from pathlib import Path
from osmosis_ai.platform.cli.eval_upload import prepare_eval_upload_plan
plan = prepare_eval_upload_plan(Path(sys.argv[1]), config_path=None)
print(json.dumps({
    "local_run_id": plan.local_run_id,
    "manifest_digest": plan.manifest_digest,
    "run": plan.run,
    "schema_versions": plan.schema_versions,
    "provenance": plan.provenance,
    "files": plan.file_requests(),
}))
"""


def official_upload_plan(python: Path, folder: Path) -> dict[str, Any]:
    """What the official `osmosis eval upload` would send for `folder` (checked offline by its
    `prepare_eval_upload_plan`); fails the test with the official refusal."""
    done = subprocess.run(
        [str(python), "-c", _UPLOAD_PLAN, str(folder)],
        env=official_env(python),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SEC,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"the official upload refuses {folder}:\n{_tail(done.stderr)}", pytrace=False)
    plan: dict[str, Any] = json.loads(done.stdout)
    return plan


def envelope(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON document a `--json` run printed, or a failure that shows its output."""
    if result.returncode != 0:
        pytest.fail(
            f"exit {result.returncode}\nstdout:\n{_tail(result.stdout)}\n"
            f"stderr:\n{_tail(result.stderr)}",
            pytrace=False,
        )
    document: dict[str, Any] = json.loads(result.stdout)
    return document
