"""Fixtures of the `osmosis-tui eval` acceptance tests: a shared `serve --demo`, a workspace
copy, and the full demo run started in the background. The helpers are plain modules beside
this one: command.py (the eval subprocess), files.py (datasets and results), servers.py.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# The conformance venv (Python 3.12, official osmosis-ai) for the official-server workspace test.
from tests.conformance.conftest import official_python  # noqa: F401
from tests.eval.runs.command import RunningEval, start_eval
from tests.eval.runs.servers import ServedDemo, served_demo

HERE = Path(__file__).resolve().parent
WORKSPACE = HERE / "workspace"
FULL_DEMO_TEST = "test_full_demo_headless"


@pytest.fixture(scope="session")
def demo_server() -> Iterator[ServedDemo]:
    """One `serve --demo` shared by the tests that do not stop or kill their server."""
    with served_demo() as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of the workspace fixture (configs/, data/, rollouts/) in a fresh folder."""
    target = tmp_path / "workspace"
    # Without what running a rollout leaves in the source tree (uv's environment and lock).
    ignore = shutil.ignore_patterns("__pycache__", ".venv", "uv.lock")
    shutil.copytree(WORKSPACE, target, ignore=ignore)
    return target


# -- the full demo runs in the background while the other tests run --------------------------
#
# The demo's three stuck rows sleep two minutes. Started as soon as collection is done, the
# full run waits out those minutes alongside the rest of the suite, and its test (run last)
# only collects the result.

_FULL_DEMO = pytest.StashKey[tuple[RunningEval, Path]]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.name == FULL_DEMO_TEST)


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.name == FULL_DEMO_TEST for item in session.items):
        cwd = Path(tempfile.mkdtemp(prefix="osmosis-full-demo-"))
        running = start_eval("--headless", "--json", "--name", "full-demo", cwd=cwd)
        session.config.stash[_FULL_DEMO] = (running, cwd)


def pytest_sessionfinish(session: pytest.Session) -> None:
    started = session.config.stash.get(_FULL_DEMO, None)
    if started is not None:
        running, cwd = started
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait()
        shutil.rmtree(cwd, ignore_errors=True)


@pytest.fixture
def full_demo_run(request: pytest.FixtureRequest) -> tuple[RunningEval, Path]:
    """The background `osmosis-tui eval --headless --json` of the whole demo, and its cwd."""
    return request.config.stash[_FULL_DEMO]
