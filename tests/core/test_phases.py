"""The skip-reason rule shared by handles, the board and replays (DESIGN.md §2)."""

from __future__ import annotations

import pytest

from core.phases import reached_phase, skipped_phases
from core.result_head import ResultHead
from core.types import RolloutErrorCategory, RolloutResultResponse, RolloutSample, RolloutStatus

Q, R, G = RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.GRADING
S, F, C = RolloutStatus.SUCCESS, RolloutStatus.FAILURE, RolloutStatus.CANCELLED


def failure(
    category: RolloutErrorCategory | None, *, sample: bool = False, message: str = "x"
) -> ResultHead:
    """The head of a failed result, as a record hands it to the phase rules."""
    return ResultHead.of(
        RolloutResultResponse(
            rollout_id="r",
            status=F,
            sample=RolloutSample(messages=[]) if sample else None,
            err_message=message,
            err_category=category,
        )
    )


@pytest.mark.parametrize(
    ("observed", "current", "grade", "expected"),
    [
        ([Q, S], S, True, {R: "not_observed", G: "not_observed"}),
        ([Q, R, S], S, False, {G: "not_requested"}),
        ([Q, R], R, False, {G: "not_requested"}),  # known from the request, even mid-run
        ([Q, R], R, True, {}),  # grading is still ahead, not skipped
        ([Q, R, F], F, True, {G: "ended_early"}),
        ([Q, C], C, True, {R: "ended_early", G: "ended_early"}),
        ([Q, S], S, None, {R: "not_observed", G: "not_observed"}),  # a replay of old records
    ],
)
def test_reasons_from_what_was_observed(
    observed: list[RolloutStatus],
    current: RolloutStatus,
    grade: bool | None,
    expected: dict[RolloutStatus, str],
) -> None:
    assert skipped_phases(observed, current, grade=grade) == expected


def test_a_workflow_failure_proves_it_ran_though_running_was_not_seen() -> None:
    result = failure(RolloutErrorCategory.AGENT_ERROR)
    assert reached_phase(result) is R
    assert skipped_phases([Q, F], F, grade=True, result=result) == {
        R: "not_observed",
        G: "ended_early",
    }


def test_a_grader_failure_keeps_the_sample_and_proves_grading() -> None:
    result = failure(RolloutErrorCategory.AGENT_ERROR, sample=True)
    assert reached_phase(result) is G
    assert skipped_phases([Q, F], F, grade=True, result=result) == {
        R: "not_observed",
        G: "not_observed",
    }


def test_impossible_grading_keeps_the_sample_but_never_graded() -> None:
    result = failure(
        RolloutErrorCategory.VALIDATION_ERROR,
        sample=True,
        message="grading was requested but this server has no grader",
    )
    assert reached_phase(result) is R


@pytest.mark.parametrize(
    "category", [RolloutErrorCategory.LEASE_EXPIRED, RolloutErrorCategory.INTERNAL_ERROR, None]
)
def test_lease_expiry_and_crashes_prove_nothing(category: RolloutErrorCategory | None) -> None:
    result = failure(category)
    assert reached_phase(result) is None
    assert skipped_phases([Q, F], F, grade=True, result=result) == {
        R: "ended_early",
        G: "ended_early",
    }
