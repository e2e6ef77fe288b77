"""The report of a real official `osmosis eval run` folder (osmosis-ai 0.3.8, in the conformance
venv; skipped without Python 3.12, as the conformance tests are): its numbers are the run's
own, and its failure comes with the conversation the official server left."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.eval.report.failures import NO_CONVERSATION
from core.eval.report.page import render_report
from tests.conformance.conftest import official_python
from tests.conformance.official_eval import (
    EVALS,
    envelope,
    make_workspace,
    run_official_eval,
    stub_model,
)
from tests.report.test_page import Elements
from tui.commands.report import report_of
from tui.sources.replay import ReplaySource

pytestmark = pytest.mark.conformance
__all__ = ["official_python"]


@pytest.fixture(scope="module")
def official_folder(
    official_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("report-official")
    workspace = make_workspace(tmp / "ws")
    with stub_model(tmp / "model.log") as model_url:
        envelope(run_official_eval(official_python, workspace, model_url, "--name", "official"))
    yield workspace / EVALS / "official"


def test_an_official_run_reports_its_own_numbers(official_folder: Path) -> None:
    report = report_of(ReplaySource(official_folder))
    elements = Elements(render_report(report))
    journal = [
        json.loads(line)
        for line in (official_folder / "events.jsonl").read_text().splitlines()
        if line
    ]
    summary = json.loads((official_folder / "metrics.json").read_text())["summary"]
    assert report.progress.done == summary["total_samples"]
    assert report.progress.passed == summary["passed"]
    # A row per journaled result, and each result on the rail once.
    table = elements.having("table", id="rows")[0]
    assert int(table["data-rows"]) == len(journal)
    on_rail = sum(int(rect["data-count"]) for rect in elements.having("rect", class_="outcome"))
    ended = Counter(s.outcome for s in report.timeline.spans.values() if s.end is not None)
    assert on_rail == sum(ended.values()) == len(journal)
    # The failed items (the row whose question says FAIL), each with its error type, and the
    # page says it has no conversation for them rather than showing an empty one.
    failed = sorted(entry["rollout_id"] for entry in journal if entry["status"] == "failed")
    listed = sorted(item["data-rollout"] for item in elements.having("li", class_="failure"))
    assert failed and listed == failed
    text = "".join(elements.text)
    assert text.count(" · agent_error") == len(failed)
    assert text.count(NO_CONVERSATION) == len(failed)
