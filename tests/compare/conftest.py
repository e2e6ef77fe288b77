"""The compare tests' run folders: made once per session by real runs (`real_runs`), ours and
the official `osmosis eval run`'s, in the conformance venv's Python 3.12 (skipped without one,
as the conformance tests are)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compare.real_runs import RealRuns, make_runs
from tests.conformance.conftest import official_python

__all__ = ["official_python", "real_runs"]


@pytest.fixture(scope="session")
def real_runs(official_python: Path, tmp_path_factory: pytest.TempPathFactory) -> RealRuns:
    return make_runs(official_python, tmp_path_factory.mktemp("compare-runs"))
