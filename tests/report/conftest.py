"""The report tests' run folders, made once per session (a real run takes seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.runs import demo_run, hostile_run


@pytest.fixture(scope="session")
def demo_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_run(tmp_path_factory.mktemp("report-demo"))


@pytest.fixture(scope="session")
def hostile_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile_run(tmp_path_factory.mktemp("report-hostile") / "hostile")
