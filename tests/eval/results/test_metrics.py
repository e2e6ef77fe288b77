"""`metrics.json`: the summary on a fixed journal, checked against numbers worked out by hand
and against numbers the official `osmosis eval run` wrote."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.eval.results.events import Journal
from core.eval.results.index import index_row
from core.eval.results.metrics import (
    RunIdentity,
    RunState,
    metrics_document,
    pass_at_k,
    progress,
    recorded_pass_threshold,
    summarize,
)
from core.eval.results.records import ItemResult, ItemStatus

SUMMARY_KEYS = [
    "total_samples",
    "completed_samples",
    "graded",
    "passed",
    "failed",
    "skipped",
    "pass_rate",
    "pass_threshold",
    "tokens_used",
]

# n = 4 attempts per row, pass threshold 1.0. Rows 0-3 pass 0, 1, 2 and 4 times; row 4 has
# three skipped attempts and one pending (no record), so 5 * 4 = 20 work items, 19 finished.
# The first line is superseded by a later record for the same (row, run): last wins.
FIXED_JOURNAL = """\
{"row_index":2,"run_index":3,"rollout_id":"old","status":"success","source_row_index":12,"reward":1.0,"tokens":999}
{"row_index":0,"run_index":0,"rollout_id":"a00","status":"success","source_row_index":10,"reward":0.0,"tokens":10}
{"row_index":0,"run_index":1,"rollout_id":"a01","status":"failed","source_row_index":10,"error_type":"timeout"}
{"row_index":0,"run_index":2,"rollout_id":"a02","status":"success","source_row_index":10,"reward":0.5,"tokens":10}
{"row_index":0,"run_index":3,"rollout_id":"a03","status":"success","source_row_index":10,"reward":0.0,"tokens":10}
{"row_index":1,"run_index":0,"rollout_id":"a10","status":"success","source_row_index":11,"reward":1.0,"tokens":10}
{"row_index":1,"run_index":1,"rollout_id":"a11","status":"success","source_row_index":11,"reward":0.0,"tokens":10}
{"row_index":1,"run_index":2,"rollout_id":"a12","status":"success","source_row_index":11,"reward":0.0,"tokens":10}
{"row_index":1,"run_index":3,"rollout_id":"a13","status":"success","source_row_index":11,"reward":0.25,"tokens":10}
{"row_index":2,"run_index":0,"rollout_id":"a20","status":"success","source_row_index":12,"reward":1.0,"tokens":10}
{"row_index":2,"run_index":1,"rollout_id":"a21","status":"success","source_row_index":12,"reward":1,"tokens":10}
{"row_index":2,"run_index":2,"rollout_id":"a22","status":"success","source_row_index":12,"reward":0.0,"tokens":10}
{"row_index":2,"run_index":3,"rollout_id":"a23","status":"failed","source_row_index":12,"tokens":10,"error_type":"agent_error"}
{"row_index":3,"run_index":0,"rollout_id":"a30","status":"success","source_row_index":13,"reward":1.0,"tokens":10}
{"row_index":3,"run_index":1,"rollout_id":"a31","status":"success","source_row_index":13,"reward":1.0,"tokens":10}
{"row_index":3,"run_index":2,"rollout_id":"a32","status":"success","source_row_index":13,"reward":1.0,"tokens":10}
{"row_index":3,"run_index":3,"rollout_id":"a33","status":"success","source_row_index":13,"reward":1.0,"tokens":10}
{"row_index":4,"run_index":0,"rollout_id":"a40","status":"skipped","source_row_index":14,"tokens":5}
{"row_index":4,"run_index":1,"rollout_id":"a41","status":"skipped","source_row_index":14,"reward":1.0,"tokens":5}
{"row_index":4,"run_index":2,"rollout_id":"a42","status":"skipped","source_row_index":14,"tokens":5}
"""


def _rows(results: Iterable[ItemResult]) -> list[dict[str, Any]]:
    return [index_row(result, trajectory=None, resumed=False) for result in results]


def _fixed_rows(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "events.jsonl"
    path.write_text(FIXED_JOURNAL)
    warnings: list[str] = []
    results = Journal.load(path, on_warning=warnings.append)
    assert warnings == []
    return _rows(results[key] for key in sorted(results))


@pytest.mark.parametrize("threshold", [1.0, 0.5, 0.0])
def test_progress_counts_as_the_summary_does(tmp_path: Path, threshold: float) -> None:
    # Straight from the journal lines, the superseded one included: the last one wins here too.
    lines = [ItemResult.from_json(json.loads(line)) for line in FIXED_JOURNAL.splitlines()]
    summary = summarize(_fixed_rows(tmp_path), pass_threshold=threshold)
    shown = progress(lines, total_items=20, pass_threshold=threshold)
    assert (shown.done, shown.total) == (summary["total_samples"], 20)
    assert (shown.passed, shown.completed) == (summary["passed"], summary["completed_samples"])
    assert shown.pass_rate == summary["pass_rate"]
    assert shown.rewards_count == summary["graded"]
    assert shown.mean_reward == pytest.approx(summary["reward_stats"]["mean"])


def test_progress_before_anything_finished_has_no_rates() -> None:
    shown = progress([], total_items=3, pass_threshold=1.0)
    assert (shown.done, shown.total, shown.pass_rate, shown.mean_reward) == (0, 3, None, None)


def test_the_recorded_threshold_of_a_metrics_document() -> None:
    assert recorded_pass_threshold({"summary": {"pass_threshold": 0.5}}) == 0.5
    assert recorded_pass_threshold({"summary": {"pass_threshold": 0}}) == 0.0
    odd: list[object] = [None, [], {"summary": {}}, {"summary": {"pass_threshold": True}}]
    assert [recorded_pass_threshold(document) for document in odd] == [None] * len(odd)


def test_summary_of_the_fixed_journal(tmp_path: Path) -> None:
    summary = summarize(_fixed_rows(tmp_path), pass_threshold=1.0)

    # Graded rewards (14; the failed items have none, the skipped ones do not count):
    #   row 0: 0, 0.5, 0   row 1: 1, 0, 0, 0.25   row 2: 1, 1, 0   row 3: 1, 1, 1, 1
    # sum 7.75; sorted: five 0s, 0.25, 0.5, seven 1s -> median (0.5 + 1) / 2 = 0.75.
    # sum of squares 7.3125 -> population variance 7.3125/14 - (7.75/14)^2 = 42.3125/196.
    # pass@k per row (a = 4 attempts, c passes) with 1 - C(4-c, k) / C(4, k):
    #   k=1: 0, 1/4, 2/4, 1         -> mean 0.4375
    #   k=2: 0, 1-3/6, 1-1/6, 1     -> (0 + 1/2 + 5/6 + 1) / 4 = 7/12
    #   k=4: 0, 1, 1, 1             -> 0.75
    # Row 4 has no non-skipped attempt, so it is in no pass@k average.
    assert summary == {
        "total_samples": 19,
        "skipped": 3,
        "completed_samples": 16,
        "failed": 2,
        "graded": 14,
        "passed": 7,
        "pass_rate": 7 / 16,
        "pass_threshold": 1.0,
        # 15 of rows 0-3 carry 10 tokens (a01 none), the skipped 5 each; the superseded 999
        # does not count.
        "tokens_used": 15 * 10 + 3 * 5,
        "reward_stats": {
            "mean": pytest.approx(7.75 / 14),
            "median": 0.75,
            "std": pytest.approx(math.sqrt(42.3125 / 196)),
            "min": 0.0,
            "max": 1.0,
        },
        "n_runs": 4,
        "pass_at_k": [
            {"k": 1, "value": pytest.approx(0.4375)},
            {"k": 2, "value": pytest.approx(7 / 12)},
            {"k": 4, "value": pytest.approx(0.75)},
        ],
    }
    assert list(summary) == [*SUMMARY_KEYS, "reward_stats", "n_runs", "pass_at_k"]
    assert list(summary["reward_stats"]) == ["mean", "median", "std", "min", "max"]
    assert math.isclose(summary["reward_stats"]["std"], 0.46462899, rel_tol=1e-7)


def test_the_threshold_decides_what_passes(tmp_path: Path) -> None:
    summary = summarize(_fixed_rows(tmp_path), pass_threshold=0.25)
    # Rewards >= 0.25: row 0 one (0.5), row 1 two (1, 0.25), row 2 two, row 3 four.
    assert summary["passed"] == 9
    assert summary["pass_rate"] == 9 / 16
    assert summary["pass_at_k"][0] == {"k": 1, "value": pytest.approx((1 + 2 + 2 + 4) / 16)}


def _result(
    row: int, run: int, status: ItemStatus = "success", reward: float | None = None
) -> ItemResult:
    return ItemResult(
        row_index=row,
        run_index=run,
        rollout_id=f"r{row}-{run}",
        status=status,
        source_row_index=row,
        reward=reward,
        tokens=3,
    )


def test_the_numbers_the_official_tool_wrote_for_the_same_results() -> None:
    # Run `r1` of osmosis eval run 0.3.8: rows 0, 1, 3, 4 graded 1.0, 0.25, 1.0, 1.0; row 2
    # failed; 13 tokens each but the failed one. Its metrics.json summary, float for float:
    rewards = {0: 1.0, 1: 0.25, 3: 1.0, 4: 1.0}
    results = [
        ItemResult(row, 0, f"id{row}", "success", row, reward=reward, tokens=13)
        for row, reward in rewards.items()
    ] + [ItemResult(2, 0, "id2", "failed", 2, error_type="agent_error")]
    summary = summarize(_rows(sorted(results, key=lambda r: r.key)), pass_threshold=1.0)
    assert summary == {
        "total_samples": 5,
        "completed_samples": 5,
        "graded": 4,
        "passed": 3,
        "failed": 1,
        "skipped": 0,
        "pass_rate": 0.6,
        "pass_threshold": 1.0,
        "tokens_used": 52,
        "reward_stats": {
            "mean": 0.8125,
            "median": 1.0,
            "std": 0.3247595264191645,
            "min": 0.25,
            "max": 1.0,
        },
    }


def test_population_std_not_sample_std() -> None:
    summary = summarize(
        _rows([_result(0, 0, reward=0.0), _result(1, 0, reward=1.0)]), pass_threshold=1
    )
    assert summary["reward_stats"] == {
        "mean": 0.5,
        "median": 0.5,
        "std": 0.5,
        "min": 0.0,
        "max": 1.0,
    }


def test_one_reward_has_zero_spread() -> None:
    summary = summarize(_rows([_result(0, 0, reward=0.3)]), pass_threshold=1)
    assert summary["reward_stats"] == {
        "mean": 0.3,
        "median": 0.3,
        "std": 0.0,
        "min": 0.3,
        "max": 0.3,
    }


def test_empty_input_has_an_integer_zero_pass_rate_and_no_optional_keys() -> None:
    summary = summarize([], pass_threshold=1)
    assert summary == {
        "total_samples": 0,
        "completed_samples": 0,
        "graded": 0,
        "passed": 0,
        "failed": 0,
        "skipped": 0,
        "pass_rate": 0,
        "pass_threshold": 1.0,
        "tokens_used": 0,
    }
    assert type(summary["pass_rate"]) is int  # as official: `0`, not `0.0`
    assert type(summary["pass_threshold"]) is float


def test_all_skipped() -> None:
    results = [_result(row, 0, status="skipped", reward=1.0) for row in range(3)]
    summary = summarize(_rows(results), pass_threshold=1.0)
    assert summary["total_samples"] == 3
    assert summary["skipped"] == 3
    assert summary["completed_samples"] == 0
    assert (summary["graded"], summary["passed"], summary["failed"]) == (0, 0, 0)
    assert summary["pass_rate"] == 0
    assert summary["tokens_used"] == 9
    assert "reward_stats" not in summary  # nothing was graded


def test_all_failed_is_a_zero_pass_rate_not_an_empty_one() -> None:
    results = [_result(row, 0, status="failed") for row in range(4)]
    summary = summarize(_rows(results), pass_threshold=1.0)
    assert (summary["completed_samples"], summary["failed"], summary["graded"]) == (4, 4, 0)
    assert summary["pass_rate"] == 0.0
    assert "reward_stats" not in summary


def test_single_attempt_runs_have_no_n_runs_and_no_pass_at_k() -> None:
    summary = summarize(_rows([_result(0, 0, reward=1.0)]), pass_threshold=1)
    assert "n_runs" not in summary
    assert "pass_at_k" not in summary


@pytest.mark.parametrize(("n", "ks"), [(2, [1, 2]), (3, [1, 2]), (5, [1, 2, 4]), (8, [1, 2, 4, 8])])
def test_k_runs_over_powers_of_two_up_to_n(n: int, ks: list[int]) -> None:
    results = [_result(0, run, reward=float(run % 2)) for run in range(n)]
    summary = summarize(_rows(results), pass_threshold=1.0)
    assert summary["n_runs"] == n
    assert [point["k"] for point in summary["pass_at_k"]] == ks


def test_n_runs_counts_what_ran_and_pass_at_k_needs_two_points() -> None:
    # n_runs is the highest run_index + 1 over all rows, skipped ones too; the only row with a
    # second attempt has one non-skipped attempt, so only k = 1 has a value: no pass@k.
    results = [_result(0, 0, status="skipped"), _result(0, 1, reward=1.0)]
    summary = summarize(_rows(results), pass_threshold=1.0)
    assert summary["n_runs"] == 2
    assert "pass_at_k" not in summary


def test_rows_short_of_k_attempts_are_left_out_of_that_k() -> None:
    # Row 0: all 4 attempts, one pass. Row 1: two finished (one pass), one skipped, one pending.
    results = [_result(0, run, reward=1.0 if run == 0 else 0.0) for run in range(4)]
    results += [_result(1, 0, reward=1.0), _result(1, 1, reward=0.0)]
    results += [_result(1, 2, status="skipped")]
    summary = summarize(_rows(results), pass_threshold=1.0)
    assert summary["pass_at_k"] == [
        {"k": 1, "value": pytest.approx((1 / 4 + 1 / 2) / 2)},
        {"k": 2, "value": pytest.approx(((1 - 3 / 6) + 1.0) / 2)},
        {"k": 4, "value": pytest.approx(1.0)},  # row 0 only
    ]


def test_pass_at_k_matches_counting_every_draw() -> None:
    for attempts in range(1, 7):
        for passes in range(attempts + 1):
            outcomes = [True] * passes + [False] * (attempts - passes)
            for k in range(1, attempts + 1):
                draws = list(itertools.combinations(outcomes, k))
                expected = sum(any(draw) for draw in draws) / len(draws)
                assert pass_at_k(attempts, passes, k) == pytest.approx(expected)


def test_pass_at_k_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


IDENTITY = RunIdentity(
    local_run_id="c457393d3c8741fe9851ab8008f74f18",
    run_name="r1",
    dataset_name="multiply",
    model_name="openai/gpt-5-mini",
    rollout_name="multiply",
    started_at="2025-01-01T12:00:00.000000Z",
)


def test_metrics_document_shape(tmp_path: Path) -> None:
    summary = summarize(_fixed_rows(tmp_path), pass_threshold=1.0)
    document = metrics_document(
        summary,
        IDENTITY,
        state="finished",
        duration_ms=60_000,
        completed_at="2025-01-01T12:01:00.000000Z",
    )
    assert list(document) == ["eval_run", "summary"]
    assert list(document["eval_run"].items()) == [
        ("id", "c457393d3c8741fe9851ab8008f74f18"),
        ("status", "finished"),
        ("name", "r1"),
        ("dataset_name", "multiply"),
        ("model_name", "openai/gpt-5-mini"),
        ("rollout_name", "multiply"),
        ("duration_ms", 60_000.0),
        ("started_at", "2025-01-01T12:00:00.000000Z"),
        ("completed_at", "2025-01-01T12:01:00.000000Z"),
    ]
    assert type(document["eval_run"]["duration_ms"]) is float
    assert document["summary"] == summary
    assert json.loads(json.dumps(document, allow_nan=False)) == document


@pytest.mark.parametrize("state", ["running", "incomplete"])
def test_only_a_finished_run_has_a_completion_time(state: RunState) -> None:
    document = metrics_document(
        summarize([], pass_threshold=1.0),
        IDENTITY,
        state=state,
        completed_at="2025-01-01T12:01:00.000000Z",
    )
    assert "completed_at" not in document["eval_run"]
    assert document["eval_run"]["duration_ms"] == 0.0


HUGE = 1.7976931348623157e308  # the largest float


@pytest.mark.parametrize(
    ("rewards", "stats"),
    [
        ([1e308, 1e308], {"mean": 1e308, "median": 1e308, "std": 0.0}),
        ([HUGE, -HUGE], {"mean": 0.0, "median": 0.0, "std": HUGE}),
        ([HUGE, HUGE, HUGE], {"mean": HUGE, "median": HUGE, "std": 0.0}),
        ([1e308, -1.7e308, 1.0], {"mean": -2.333333333333333e307, "median": 1.0}),
        ([-HUGE, -HUGE, 0.5, 0.25], {"mean": -HUGE / 2, "median": -HUGE / 2}),
    ],
)
def test_huge_finite_rewards_give_finite_statistics(
    rewards: list[float], stats: dict[str, float]
) -> None:
    # statistics.fmean raises OverflowError on these and median gives inf: every refresh
    # of metrics.json, and every resume, used to fail the same way.
    results = [_result(row, 0, reward=reward) for row, reward in enumerate(rewards)]
    summary = summarize(_rows(results), pass_threshold=1.0)
    reward_stats = summary["reward_stats"]
    for key, value in stats.items():
        assert reward_stats[key] == pytest.approx(value, rel=1e-15), key
    assert (reward_stats["min"], reward_stats["max"]) == (min(rewards), max(rewards))
    assert all(math.isfinite(value) for value in reward_stats.values())
    json.dumps(summary, allow_nan=False)  # standard JSON, as metrics.json is written
    shown = progress(results, total_items=len(rewards), pass_threshold=1.0)
    assert shown.mean_reward == reward_stats["mean"]


def test_the_live_mean_is_the_summary_mean_float_for_float(tmp_path: Path) -> None:
    lines = [ItemResult.from_json(json.loads(line)) for line in FIXED_JOURNAL.splitlines()]
    summary = summarize(_fixed_rows(tmp_path), pass_threshold=1.0)
    shown = progress(lines, total_items=20, pass_threshold=1.0)
    assert shown.mean_reward == summary["reward_stats"]["mean"]


def test_progress_says_what_is_left_and_how_long_it_takes() -> None:
    shown = progress([], total_items=10, pass_threshold=1.0, in_flight=3, stuck=1)
    assert (shown.in_flight, shown.stuck, shown.not_dispatched, shown.left) == (3, 1, 7, 10)
    # The stuck rollout aside: 9 items at 3 a second (a lower bound: the stuck one may end late).
    assert shown.eta_sec(3.0) == 3.0
    assert shown.eta_sec(None) is None and shown.eta_sec(0.0) is None  # no rate: unknown
    assert not shown.stalled
    told = progress([], total_items=10, pass_threshold=1.0, in_flight=2, not_dispatched=5)
    assert told.not_dispatched == 5  # the runner's own count, when it has one


def test_progress_with_nothing_but_stuck_work_has_no_eta() -> None:
    shown = progress([], total_items=4, pass_threshold=1.0, in_flight=2, stuck=2)
    assert shown.stalled and shown.not_dispatched == 2
    assert shown.eta_sec(100.0) == 2 / 100.0  # the items behind them
    only_stuck = progress([], total_items=2, pass_threshold=1.0, in_flight=2, stuck=2)
    assert only_stuck.stalled and only_stuck.eta_sec(100.0) is None
    done = progress([], total_items=0, pass_threshold=1.0)
    assert done.left == 0 and done.eta_sec(None) == 0.0


def test_progress_leaves_overdue_work_out_of_the_eta() -> None:
    shown = progress([], total_items=8, pass_threshold=1.0, in_flight=4, stuck=1, overdue=3)
    assert (shown.stuck, shown.overdue, shown.not_dispatched) == (1, 3, 4)
    assert shown.eta_sec(1.0) == 5.0  # 4 not dispatched and the 1 in flight on time
    assert not shown.stalled
    assert progress([], total_items=2, pass_threshold=1.0, in_flight=1, stuck=1).overdue == 1


def test_progress_tells_this_invocations_finishes_from_those_carried_over() -> None:
    """A resume's carried-over results are done, but not this session's: its rate and ETA
    are counted from `done_here` only."""
    results = [_result(row, 0, reward=1.0) for row in range(4)]
    shown = progress(results, total_items=6, pass_threshold=1.0, carried=results[:3])
    assert (shown.done, shown.carried, shown.done_here) == (4, 3, 1)
    assert progress(results, total_items=6, pass_threshold=1.0).done_here == 4


def test_progress_counts_the_carried_over_results_per_status_and_failure_category() -> None:
    """The summary's chips and failures line count the run: a resume's carried-over results
    are on no board of this session, so the progress says them per status and category (a
    failure the runner or a message named is `other`, as on the board)."""
    carried = [
        _result(0, 0, reward=1.0),
        _result(1, 0, "skipped"),
        replace(_result(2, 0, "failed"), error_type="timeout"),
        replace(_result(3, 0, "failed"), error_type="timeout"),
        replace(_result(4, 0, "failed"), error_type="item_deadline_exceeded"),
    ]
    shown = progress(
        [*carried, _result(5, 0, "failed")], total_items=6, pass_threshold=1.0, carried=carried
    )
    assert (shown.carried, shown.carried_success, shown.carried_failed) == (5, 2, 3)
    assert shown.carried_failures == {"timeout": 2, "other": 1}
