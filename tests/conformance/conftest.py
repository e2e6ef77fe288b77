"""Fixtures for the conformance tests: the Python 3.12 venv with the official osmosis-ai."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.venv import NoPython312, VenvBuildError, ensure_venv


@pytest.fixture(scope="session")
def official_python() -> Path:
    """Python of the cached 3.12 venv holding osmosis-ai 0.3.8 (see `tests.conformance.venv`)
    and this project.

    Skips when the machine has no Python 3.12; fails (with pip's output) when the build fails.
    """
    try:
        return ensure_venv()
    except NoPython312 as exc:
        pytest.skip(f"conformance tests need Python 3.12: {exc}")
    except VenvBuildError as exc:
        pytest.fail(f"building the conformance venv failed:\n{exc}", pytrace=False)
