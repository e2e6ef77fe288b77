"""Distributions over many rollouts (`core.eval.timing.distributions`): percentiles against
hand-computed values, round bins that hold exactly their values, and each metric's values
read from known records."""

from __future__ import annotations

import pytest

from core.board import RolloutBoard
from core.eval.timing.distributions import (
    METRIC_KEYS,
    METRICS,
    distribution,
    histogram,
    nice_width,
    percentile,
)
from tests.eval.timing.helpers import F, G, Q, R, S, call, polled


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        # Linear between the closest ranks: position (n - 1) * q / 100.
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),  # 1.5 → halfway from 2 to 3
        ([1.0, 2.0, 3.0, 4.0], 95, 3.85),  # 2.85 → 3 + 0.85
        ([1.0, 2.0, 3.0, 4.0], 99, 3.97),  # 2.97 → 3 + 0.97
        ([0.2, 0.4, 0.5, 0.9, 7.0], 50, 0.5),  # the middle one
        ([0.2, 0.4, 0.5, 0.9, 7.0], 95, 5.78),  # 3.8 → 0.9 + 0.8 × 6.1
        ([0.2, 0.4, 0.5, 0.9, 7.0], 99, 6.756),  # 3.96 → 0.9 + 0.96 × 6.1
        ([10.0], 99, 10.0),
    ],
)
def test_percentiles_match_hand_computed_values(
    values: list[float], q: int, expected: float
) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_a_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


@pytest.mark.parametrize(
    ("raw", "resolution", "width"),
    [
        (0.18, 0.01, 0.2),
        (0.21, 0.01, 0.25),
        (0.3, 0.01, 0.5),
        (7.0, 0.01, 10.0),
        (1.0, 0.01, 1.0),
        (0.011, 0.01, 0.02),
        (0.2, 0.0, 0.2),
        (2.1, 1.0, 5.0),  # 2.5 tokens is no width
        (21.0, 1.0, 25.0),
    ],
)
def test_bin_widths_are_round_and_whole_numbers_of_the_resolution(
    raw: float, resolution: float, width: float
) -> None:
    assert nice_width(raw, resolution) == pytest.approx(width)


def test_each_bin_holds_exactly_its_values_and_their_rollouts() -> None:
    samples = [("a", 0.3), ("b", 0.1), ("c", 0.25), ("d", 0.9), ("e", 1.0), ("a", 0.85)]
    bins = histogram(samples, 5, resolution=0.01)
    # (1.0 - 0.1) / 5 = 0.18 → bins 0.2 wide from 0.0; 0.3 starts no bin, 1.0 ends the last.
    assert [(round(b.low, 6), round(b.high, 6), b.count, b.rollout_ids) for b in bins] == [
        (0.0, 0.2, 1, frozenset({"b"})),
        (0.2, 0.4, 2, frozenset({"a", "c"})),
        (0.4, 0.6, 0, frozenset()),
        (0.6, 0.8, 0, frozenset()),
        (0.8, 1.0, 3, frozenset({"a", "d", "e"})),
    ]


def test_equal_values_are_one_bin_and_no_bin_is_narrower_than_the_resolution() -> None:
    assert [(b.low, b.high, b.count) for b in histogram([("a", 2.0), ("b", 2.0)], 8)] == [
        (2.0, 2.0, 2)
    ]
    # 40 to 43 tokens in 20 bins: a bin is never under one token.
    bins = histogram([("a", 40.0), ("b", 43.0)], 20, resolution=1.0)
    assert [(b.low, b.high) for b in bins] == [(40.0, 41.0), (41.0, 42.0), (42.0, 43.0)]
    assert [b.count for b in bins] == [1, 0, 1]


def test_never_more_bins_than_asked_for() -> None:
    # 0.05 to 0.95 in 3 bins: 0.3 is rounded up to 0.5, from 0.0: two bins.
    bins = histogram([("a", 0.05), ("b", 0.95), ("c", 0.5)], 3)
    assert [(b.low, b.high, b.count) for b in bins] == [(0.0, 0.5, 1), (0.5, 1.0, 2)]


def board_of_three() -> RolloutBoard:
    """a: every phase seen, succeeded with reward 1 after two calls; b: failed while
    running; c: still running (its running phase has no duration yet)."""
    board = RolloutBoard()
    polled(board, "a", [(Q, 0.0), (R, 1.0), (G, 3.0), (S, 4.0)], reward=1.0)
    call(board, "a", 1.0, 1.5, tokens=30)
    call(board, "a", 2.0, 2.75, tokens=12)
    polled(board, "b", [(Q, 0.0), (R, 2.0), (F, 2.5)])
    call(board, "b", 2.0, 2.25, status=502, tokens=None)
    polled(board, "c", [(Q, 1.0), (R, 2.0)])
    return board


def test_each_metric_reads_its_values_from_the_records() -> None:
    records = list(board_of_three())
    assert METRIC_KEYS == (
        "queued",
        "running",
        "grading",
        "total",
        "latency",
        "tokens",
        "reward",
    )
    values = {
        metric.key: sorted((r.rollout_id, v) for r in records for v in metric.values(r))
        for metric in METRICS
    }
    assert values == {
        "queued": [("a", 1.0), ("b", 2.0), ("c", 1.0)],
        "running": [("a", 2.0), ("b", 0.5)],
        "grading": [("a", 1.0)],
        "total": [("a", 4.0), ("b", 2.5)],
        "latency": [("a", 0.5), ("a", 0.75), ("b", 0.25)],
        "tokens": [("a", 42.0)],
        "reward": [("a", 1.0)],
    }


def test_a_distribution_has_its_count_range_percentiles_and_bins() -> None:
    latency = next(metric for metric in METRICS if metric.key == "latency")
    found = distribution(latency, list(board_of_three()), bins=10)
    assert found.count == 3 and (found.low, found.high) == (0.25, 0.75)
    assert found.percentiles == pytest.approx([(50, 0.5), (95, 0.725), (99, 0.745)])
    # Every value is in the bin `bin_of` names, and every percentile in one of them.
    assert frozenset().union(*(b.rollout_ids for b in found.bins)) == frozenset({"a", "b"})
    for q, value in found.percentiles:
        index = found.bin_of(value)
        assert index is not None and found.bins[index].low <= value <= found.bins[index].high, q


def test_no_records_no_values() -> None:
    for found in (distribution(metric, [], bins=8) for metric in METRICS):
        assert (found.count, found.bins, found.percentiles) == (0, (), ())
        assert found.bin_of(1.0) is None
