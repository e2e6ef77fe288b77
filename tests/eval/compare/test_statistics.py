"""The paired interval and McNemar's test, checked against cases computed by hand."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.eval.compare.statistics import mcnemar_exact_p, paired_difference


def test_an_all_equal_pair_differs_by_zero_and_its_interval_holds_zero() -> None:
    same = [1.0] * 70 + [0.0] * 30
    result = paired_difference(same, same)
    assert result is not None
    assert (result.a, result.b, result.difference) == (0.7, 0.7, 0.0)
    assert (result.low, result.high) == (0.0, 0.0)
    assert result.within_noise


def test_six_more_rows_of_two_hundred() -> None:
    # A passes 140 rows; B passes those and 6 more: the paired differences are 6 ones and
    # 194 zeros, a mean of 0.03 with standard error sqrt(0.03 * 0.97 / 200) = 0.01206.
    a = [1.0] * 140 + [0.0] * 60
    b = [1.0] * 146 + [0.0] * 54
    result = paired_difference(a, b)
    assert result is not None
    assert result.rows == 200
    assert (result.a, result.b) == (0.7, 0.73)
    assert math.isclose(result.difference, 0.03)
    # The percentile bootstrap of a mean of 0/1 differences: about 0.03 -+ 1.96 x 0.01206,
    # skewed to the right (it cannot go below 0: no row got worse).
    assert 0.005 <= result.low <= 0.015
    assert 0.05 <= result.high <= 0.06
    assert not result.within_noise
    assert paired_difference(a, b) == result  # seeded: the same runs, the same interval


def test_a_change_both_ways_is_within_noise() -> None:
    # 5 rows improve and 4 regress of 100: a difference of 0.01, its interval holds 0.
    a = [1.0] * 4 + [0.0] * 5 + [1.0] * 50 + [0.0] * 41
    b = [0.0] * 4 + [1.0] * 5 + [1.0] * 50 + [0.0] * 41
    result = paired_difference(a, b)
    assert result is not None
    assert math.isclose(result.difference, 0.01)
    assert result.low < 0 < result.high


def test_many_distinct_differences_are_resampled_row_by_row() -> None:
    # 600 distinct differences, past the multinomial shortcut: the interval of a constant
    # shift of 0.25 with a small spread around it stays near 0.25.
    a = [index / 600 for index in range(600)]
    b = [value + 0.25 + (index % 7 - 3) / 1000 for index, value in enumerate(a)]
    result = paired_difference(a, b)
    assert result is not None
    assert result.low <= result.difference <= result.high
    assert result.low > 0.245 and result.high < 0.255


def test_no_rows_no_interval() -> None:
    assert paired_difference([], []) is None
    with pytest.raises(ValueError, match="as many"):
        paired_difference([1.0], [])


@pytest.mark.parametrize(
    ("regressed", "improved", "expected"),
    [
        (0, 0, 1.0),
        # 6 discordant pairs all one way: 2 x 0.5^6.
        (0, 6, 2 * 0.5**6),
        # 2 against 8: 2 x (C(10,0) + C(10,1) + C(10,2)) / 2^10 = 2 x 56 / 1024.
        (2, 8, 2 * 56 / 1024),
        (8, 2, 2 * 56 / 1024),
        # An even split is no evidence at all.
        (5, 5, 1.0),
    ],
)
def test_mcnemar_exact_p_as_computed_by_hand(
    regressed: int, improved: int, expected: float
) -> None:
    assert math.isclose(mcnemar_exact_p(regressed, improved), expected)


def _exact_two_sided(regressed: int, improved: int) -> Fraction:
    """The exact p-value, summed in integers: 2 x P(X <= fewer) for X ~ Binomial(n, 1/2)."""
    discordant, fewer = regressed + improved, min(regressed, improved)
    if 2 * fewer == discordant:
        return Fraction(1)
    tail = term = 1  # C(n, 0), then each C(n, i) from the one before
    for i in range(fewer):
        term = term * (discordant - i) // (i + 1)
        tail += term
    return min(Fraction(1), Fraction(2 * tail, 2**discordant))


@given(st.integers(0, 3_000), st.integers(0, 3_000))
@settings(max_examples=300, deadline=None)
def test_mcnemar_exact_p_matches_the_exact_tail_summed_in_integers(
    regressed: int, improved: int
) -> None:
    exact = _exact_two_sided(regressed, improved)
    if exact < Fraction(1, 10**300):
        return  # past a double's range: 0.0 and the smallest doubles are all it can say
    assert math.isclose(mcnemar_exact_p(regressed, improved), float(exact), rel_tol=1e-11)


@pytest.mark.parametrize(
    ("regressed", "improved"),
    [(19_800, 20_200), (10_000, 10_001), (4_000, 6_000), (1, 30_000), (0, 1_000)],
)
def test_mcnemar_exact_p_for_many_discordant_items(regressed: int, improved: int) -> None:
    exact = _exact_two_sided(regressed, improved)
    assert math.isclose(mcnemar_exact_p(regressed, improved), float(exact), rel_tol=1e-11)
