"""Work items and their results: the records the journal holds (EVAL.md §4, §6)."""

from __future__ import annotations

from typing import Any

import pytest

from core.eval.results.records import ItemResult, WorkItem
from tests.eval.results.helpers import item_result


def test_item_result_json_omits_nulls_and_keeps_spec_order() -> None:
    failed = item_result(status="failed", reward=None, tokens=None, error_type="timeout")
    assert list(failed.to_json().items()) == [
        ("row_index", 0),
        ("run_index", 0),
        ("rollout_id", "id-0-0"),
        ("status", "failed"),
        ("source_row_index", 10),
        ("duration_ms", 1234.0),
        ("error_type", "timeout"),
    ]
    assert ItemResult.from_json(failed.to_json()) == failed
    assert failed.key == (0, 0)


def test_item_result_from_json_normalises_numbers_and_ignores_unknown_keys() -> None:
    record = {**item_result().to_json(), "reward": 1, "duration_ms": 12.6, "future": True}
    parsed = ItemResult.from_json(record)
    assert parsed.reward == 1.0
    assert isinstance(parsed.reward, float)
    assert parsed.duration_ms == 12.6
    assert isinstance(parsed.duration_ms, float)


@pytest.mark.parametrize(
    "change",
    [
        {"status": "cancelled"},
        {"row_index": True},
        {"run_index": -1},
        {"rollout_id": ""},
        {"rollout_id": "../elsewhere"},
        {"rollout_id": ".."},
        {"rollout_id": 12},
        {"reward": "1"},
        {"reward": True},
        {"duration_ms": False},
        {"source_row_index": True},
        {"error_type": 3},
        {"tokens": 1.5},
        {"row_index": None},
    ],
)
def test_item_result_from_json_rejects_bad_records(change: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ItemResult.from_json({**item_result().to_json(), **change})


def test_item_result_refuses_a_reward_json_cannot_hold() -> None:
    with pytest.raises(ValueError):
        item_result(reward=float("nan"))


def test_work_item_is_a_frozen_slotted_key() -> None:
    item = WorkItem(row_index=3, run_index=1, source_row_index=7)
    assert item.key == (3, 1)
    assert not hasattr(item, "__dict__")
    with pytest.raises(AttributeError):
        item.row_index = 4  # type: ignore[misc]  # on purpose: a frozen field
