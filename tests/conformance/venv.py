"""A cached Python 3.12 virtualenv holding the official osmosis-ai 0.3.8 and this project.

osmosis-ai 0.3.8 needs Python 3.12 while the project's own tests may run on an older
interpreter, so the conformance tests drive the official package in a subprocess that runs in a
separate venv. The venv is built once under `<repo>/.conformance/venv312` and reused until its
requirement set changes (recorded in a stamp file). Building takes a file lock, so parallel test
sessions wait for one build instead of racing each other.

The project itself is installed into the venv too (`pip install -e <repo>`), so a test can also
run our own client on Python 3.12, next to the official package.

The official package comes with its `server` extra, its `eval` extra (`osmosis eval run` and
the upload checks, `prepare_eval_upload_plan`) and its `openai-agents` extra, plus `uv`: the
official `osmosis eval run` launches a workspace's rollout with the `uv` beside its interpreter.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project supports 3.10 through tomli
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO / ".conformance"
VENV_DIR = CACHE_DIR / "venv312"
STAMP = VENV_DIR / ".conformance-stamp.json"
LOCK = CACHE_DIR / "venv312.lock"
BUILD_LOG = CACHE_DIR / "venv312-build.log"

OFFICIAL_REQUIREMENT = "osmosis-ai[server,eval,openai-agents]==0.3.8"
# Not a dependency of osmosis-ai, but what its `osmosis eval run` launches rollouts with.
UV_REQUIREMENT = "uv==0.13.9"
OFFICIAL_VERSION = "0.3.8"
PYTHON_ENV = "OSMOSIS_CONFORMANCE_PYTHON"  # optional: an explicit Python 3.12 interpreter

# The conformance tests use loopback only: importing LiteLLM fetches its model price map from
# the internet unless told to use the copy it ships, and the Agents SDK exports traces to
# OpenAI unless tracing is off.
OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_AGENTS_DISABLE_TRACING": "1"}
# Would change what the official server reports or where it writes.
VENV_ENV_DROP = (
    "PYTHONPATH",
    "PYTHONHOME",
    "_OSMOSIS_ROLLOUT_INSTANCE_ID",
    "_OSMOSIS_ROLLOUT_PREVIEW_ROOT",
    "OSMOSIS_ROLLOUT_OTLP_ENDPOINT",
    "OSMOSIS_ROLLOUT_SERVER_ID",
)

PIP_TIMEOUT_SEC = 1200.0
PROBE_TIMEOUT_SEC = 30.0
LOG_TAIL_LINES = 150
STAMP_VERSION = 1


class NoPython312(LookupError):
    """No working Python 3.12 interpreter was found (the conformance tests are skipped)."""


class VenvBuildError(RuntimeError):
    """Creating the venv or installing into it failed (the conformance tests fail)."""


def _is_python312(candidate: str) -> bool:
    """True when `candidate` runs and is CPython 3.12 (pyenv shims on PATH may not run)."""
    try:
        probe = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_SEC,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0 and probe.stdout.strip() == "3.12"


def _pyenv_root() -> Path:
    pyenv = shutil.which("pyenv")
    if pyenv is not None:
        try:
            answer = subprocess.run(
                [pyenv, "root"],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_SEC,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            answer = None
        if answer is not None and answer.returncode == 0 and answer.stdout.strip():
            return Path(answer.stdout.strip())
    return Path.home() / ".pyenv"


def _patch_level(path: str) -> tuple[int, ...]:
    """Sort key for `.../versions/3.12.<n>/bin/python3` (newest patch release first)."""
    version = Path(path).parents[1].name
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def _candidates() -> Iterator[str]:
    explicit = os.environ.get(PYTHON_ENV)
    if explicit:
        yield explicit
    on_path = shutil.which("python3.12")
    if on_path is not None:
        yield on_path
    pattern = str(_pyenv_root() / "versions" / "3.12.*" / "bin" / "python3")
    yield from sorted(glob.glob(pattern), key=_patch_level, reverse=True)


def find_python312() -> str:
    """The first working Python 3.12: $OSMOSIS_CONFORMANCE_PYTHON, PATH, then pyenv."""
    tried: list[str] = []
    for candidate in _candidates():
        if candidate in tried:
            continue
        tried.append(candidate)
        if _is_python312(candidate):
            return candidate
    where = ", ".join(tried) if tried else "nothing found on PATH or under pyenv"
    raise NoPython312(f"no working Python 3.12 interpreter (tried: {where})")


def _project_dependencies() -> dict[str, Any]:
    """The parts of pyproject.toml that decide what `pip install -e <repo>` installs."""
    with (REPO / "pyproject.toml").open("rb") as handle:
        data = tomllib.load(handle)
    project = data.get("project", {})
    return {
        "build-system": data.get("build-system", {}).get("requires", []),
        "dependencies": project.get("dependencies", []),
        "requires-python": project.get("requires-python"),
    }


def requirement_set(interpreter: str) -> dict[str, Any]:
    """What the venv is built from; any change to it triggers a rebuild."""
    return {
        "stamp_version": STAMP_VERSION,
        "interpreter": str(Path(interpreter).resolve()),
        "requirements": [OFFICIAL_REQUIREMENT, UV_REQUIREMENT, f"-e {REPO}"],
        "project": _project_dependencies(),
    }


def venv_env(**extra: str) -> dict[str, str]:
    """The environment for a program the venv's Python runs: this process's, plus `extra`.

    Without the variables that would change what an official server reports or where it
    writes, and with the venv's libraries kept offline (`OFFLINE_ENV`).
    """
    env = {key: value for key, value in os.environ.items() if key not in VENV_ENV_DROP}
    env.update(OFFLINE_ENV)
    env.update(extra)
    return env


def venv_python(venv_dir: Path = VENV_DIR) -> Path:
    return venv_dir / "bin" / "python"


@contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _is_current(wanted: dict[str, Any]) -> bool:
    if not venv_python().exists() or not Path(wanted["interpreter"]).exists():
        return False
    try:
        recorded = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return False
    return bool(recorded == wanted)


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    kept = text.splitlines()[-lines:]
    return "\n".join(kept)


def _run_logged(argv: list[str], what: str, log: list[str]) -> None:
    log.append(f"$ {' '.join(argv)}")
    try:
        done = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=PIP_TIMEOUT_SEC,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout if isinstance(exc.stdout, str) else ""
        log.append(output)
        BUILD_LOG.write_text("\n".join(log))
        raise VenvBuildError(
            f"{what} did not finish within {PIP_TIMEOUT_SEC:.0f}s (full log: {BUILD_LOG})\n"
            f"{_tail(output)}"
        ) from exc
    log.append(done.stdout)
    BUILD_LOG.write_text("\n".join(log))
    if done.returncode != 0:
        raise VenvBuildError(
            f"{what} failed with exit code {done.returncode} (full log: {BUILD_LOG})\n"
            f"{_tail(done.stdout)}"
        )


def _build(interpreter: str, wanted: dict[str, Any]) -> None:
    if VENV_DIR.exists():
        shutil.rmtree(VENV_DIR)
    log: list[str] = []
    _run_logged([interpreter, "-m", "venv", str(VENV_DIR)], "creating the venv", log)
    python = str(venv_python())
    _run_logged(
        [
            python,
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            OFFICIAL_REQUIREMENT,
            UV_REQUIREMENT,
            "-e",
            str(REPO),
        ],
        f"pip install {OFFICIAL_REQUIREMENT} {UV_REQUIREMENT} -e {REPO}",
        log,
    )
    check = (
        "import importlib.metadata as m, osmosis_ai.rollout.client, "
        "osmosis_ai.rollout.server, osmosis_ai.rollout.integrations.agents.openai_agents, "
        "osmosis_ai.platform.cli.eval_upload, core, server_stub; "
        "print(m.version('osmosis-ai'))"
    )
    probe = subprocess.run(
        [python, "-c", check],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_SEC,
        check=False,
        cwd=CACHE_DIR,  # not the repo: the imports must come from the installed venv
        env=venv_env(),
    )
    if probe.returncode != 0 or probe.stdout.strip() != OFFICIAL_VERSION:
        raise VenvBuildError(
            "the new venv cannot import osmosis-ai "
            f"{OFFICIAL_VERSION} and this project:\n{probe.stdout}{probe.stderr}"
        )
    STAMP.write_text(json.dumps(wanted, indent=2, sort_keys=True))


def ensure_venv() -> Path:
    """The venv's Python, building the venv first when it is missing or out of date.

    Raises NoPython312 when no Python 3.12 exists (callers skip) and VenvBuildError when
    the build fails (callers fail, showing pip's output).
    """
    interpreter = find_python312()
    wanted = requirement_set(interpreter)
    if _is_current(wanted):
        return venv_python()
    with _exclusive_lock(LOCK):
        # Another session may have finished the build while this one waited for the lock.
        if not _is_current(wanted):
            _build(interpreter, wanted)
    return venv_python()


if __name__ == "__main__":
    print(ensure_venv())
