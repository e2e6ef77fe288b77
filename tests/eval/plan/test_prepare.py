"""The plan's work items (EVAL.md §7): rows × n, bounded before anything is built; and what
the plan calls its model and rollout."""

from __future__ import annotations

import json
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest

from core.eval.errors import InputError
from core.eval.plan.prepare import EvalRequest, prepare
from core.eval.results.records import MAX_WORK_ITEMS, WorkItem


def request(
    tmp_path: Path, rows: int, *, n: int | None = None, limit: int | None = None
) -> EvalRequest:
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text(
        "".join(json.dumps({"user_prompt": f"q{n}", "label": "1"}) + "\n" for n in range(rows))
    )
    # A server given by URL: the plan is made without reaching it.
    return EvalRequest(servers=("http://127.0.0.1:9",), dataset_file=dataset, n=n, limit=limit)


def test_work_items_are_every_row_times_every_attempt(tmp_path: Path) -> None:
    plan = prepare(request(tmp_path, 2, n=3))
    assert plan.items == tuple(
        WorkItem(row_index=row, run_index=run, source_row_index=row)
        for row in range(2)
        for run in range(3)
    )


def test_a_huge_n_is_refused_before_any_work_item_is_built(tmp_path: Path) -> None:
    # --n 100000000 used to grow the process by 70 MiB/s before anything was sent.
    huge = request(tmp_path, 1, n=MAX_WORK_ITEMS + 1)
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as caught:
            prepare(huge)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, f"{peak / 2**20:.0f} MiB: the work items were built"
    [problem] = caught.value.problems
    assert str(problem) == (
        "--n: 1 row × n = 1,000,001 is 1,000,001 work items; a run holds at most 1,000,000: "
        "lower --n, or select fewer rows (--rows, --limit)"
    )


def test_the_limit_is_on_rows_times_n(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("core.eval.plan.prepare.MAX_WORK_ITEMS", 10)
    assert len(prepare(request(tmp_path, 5, n=2)).items) == 10
    with pytest.raises(InputError) as caught:
        prepare(request(tmp_path, 4, n=3))
    assert [problem.source for problem in caught.value.problems] == ["--n"]
    # Rows alone past it: the selection is what to lower.
    with pytest.raises(InputError) as caught:
        prepare(request(tmp_path, 11))
    assert str(caught.value) == (
        f"{tmp_path / 'rows.jsonl'}: 11 rows × n = 1 is 11 work items; a run holds at most 10: "
        "select fewer rows (--rows, --limit)"
    )
    assert len(prepare(request(tmp_path, 11, limit=10)).items) == 10


def test_servers_given_by_url_are_labelled_by_what_is_known(tmp_path: Path) -> None:
    """No config says which rollout they run nor which model: the rollout is "external" where
    it runs, the model the name asked for where it is asked."""
    chat_url = "http://10.0.0.5:8000/v1"
    plan = prepare(replace(request(tmp_path, 1), chat_url=chat_url, chat_model="gpt-4o"))
    assert (plan.rollout_name, plan.model_name) == ("external", "gpt-4o")
    assert plan.rollout_label == "external at http://127.0.0.1:9"
    assert plan.model_label == f"gpt-4o at {chat_url}"
    assert plan.upstream.destination() == f"model gpt-4o at {chat_url}"
