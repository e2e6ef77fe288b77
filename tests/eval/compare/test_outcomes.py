"""The outcome of a work item and the class of a pair of them."""

from __future__ import annotations

import pytest

from core.eval.compare.outcomes import ItemClass, ItemOutcome, classify, outcome_of
from tests.eval.results.helpers import item_result

PASS = ItemOutcome("pass")
FAIL = ItemOutcome("failure")
SKIP = ItemOutcome("skipped")
TIMEOUT = ItemOutcome("error", "AgentTimeout")
CRASH = ItemOutcome("error", "AgentError")


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (PASS, FAIL, "regressed"),
        (PASS, CRASH, "regressed"),
        (FAIL, PASS, "improved"),
        (CRASH, PASS, "improved"),
        (PASS, PASS, "still_passing"),
        (FAIL, FAIL, "still_failing"),
        (CRASH, CRASH, "still_failing"),
        (CRASH, TIMEOUT, "error_changed"),
        (FAIL, CRASH, "error_changed"),
        (CRASH, FAIL, "error_changed"),
        (None, PASS, "pending"),
        (PASS, None, "pending"),
        (SKIP, PASS, "skipped"),
        (FAIL, SKIP, "skipped"),
    ],
)
def test_each_pair_has_its_class(
    a: ItemOutcome | None, b: ItemOutcome | None, expected: ItemClass
) -> None:
    assert classify(a, b) == expected


def test_an_outcome_is_counted_as_metrics_json_counts_a_pass() -> None:
    assert outcome_of(item_result(reward=0.5), 0.5) == PASS
    assert outcome_of(item_result(reward=0.49), 0.5) == FAIL
    assert outcome_of(item_result(reward=None), 0.5) == FAIL
    # A failed rollout with a reward at the threshold is graded, and passes (metrics.json).
    assert outcome_of(item_result(status="failed", reward=1.0, error_type="X"), 1.0) == PASS
    assert outcome_of(item_result(status="failed", reward=None, error_type="X"), 1.0) == (
        ItemOutcome("error", "X")
    )
    assert outcome_of(item_result(status="skipped", reward=1.0), 1.0) == SKIP
