"""The mean, median and population standard deviation of rewards, without overflow.

Rewards are finite floats, but nothing bounds their size: a grader may give 1e308. Python's
`statistics.fmean` raises `OverflowError` once the rewards' sum passes the largest float (two
rewards of 1e308 do), `statistics.median` gives `inf` when the two middle values' sum does,
and `statistics.pstdev` raises on Python 3.10 when the variance does. Such a run could never
write its `metrics.json`, nor be resumed.

Each function here returns exactly what `statistics` returns whenever that is finite, so the
numbers of ordinary runs stay float for float those of the official tool. Only past that
does it work on the rewards scaled by a power of two, which is exact (but for rewards so
small beside the largest that they cannot move the result): the answer is the one
`statistics` would give with an unbounded exponent, and it is finite, because the mean and
the median of finite values lie between their smallest and largest, and their population
deviation is at most their largest magnitude.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence


def mean(rewards: Sequence[float]) -> float:
    """`statistics.fmean(rewards)`, finite for finite rewards (at least one)."""
    result = _or_inf(statistics.fmean, rewards)
    if math.isfinite(result):
        return result
    scaled, exponent = _scaled(rewards)
    # Rounding may nudge the mean of values at the very edge of the range past them.
    inside = min(max(statistics.fmean(scaled), min(scaled)), max(scaled))
    return math.ldexp(inside, exponent)


def median(rewards: Sequence[float]) -> float:
    """`statistics.median(rewards)`, finite for finite rewards (at least one)."""
    result = statistics.median(rewards)
    if math.isfinite(result):
        return result
    # Only the mean of the two middle values can overflow; halving first is exact.
    ordered = sorted(rewards)
    middle = len(ordered) // 2
    return ordered[middle - 1] / 2 + ordered[middle] / 2


def pstdev(rewards: Sequence[float]) -> float:
    """`statistics.pstdev(rewards)`, finite for finite rewards (at least one)."""
    result = _or_inf(statistics.pstdev, rewards)
    if math.isfinite(result):
        return result
    scaled, exponent = _scaled(rewards)
    return math.ldexp(min(statistics.pstdev(scaled), max(map(abs, scaled))), exponent)


def _or_inf(function: Callable[[Sequence[float]], float], rewards: Sequence[float]) -> float:
    try:
        return function(rewards)
    except OverflowError:
        return math.inf


def _scaled(rewards: Sequence[float]) -> tuple[list[float], int]:
    """The rewards divided by 2**exponent, all below 1 in magnitude, and the exponent."""
    exponent = math.frexp(max(map(abs, rewards)))[1]
    return [math.ldexp(reward, -exponent) for reward in rewards], exponent


__all__ = ["mean", "median", "pstdev"]
