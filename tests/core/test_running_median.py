"""The running median is, after every value added, the value a sorted list of them holds at
`len // 2`: what the stuck, overdue and hedge rules read."""

from __future__ import annotations

import random

from core.running_median import RunningMedian


def test_the_median_is_the_sorted_lists_after_every_value() -> None:
    pick = random.Random(29)
    median, values = RunningMedian(), []
    assert median.median() is None and len(median) == 0
    # Ties, runs in order and against it, and spread values: every way the halves move.
    stream = [pick.choice([0.5, 1.0, 1.0, 2.0]) for _ in range(200)]
    stream += [float(n) for n in range(100)] + [float(n) for n in range(100, 0, -1)]
    stream += [pick.expovariate(0.1) for _ in range(500)]
    for value in stream:
        median.add(value)
        values.append(value)
        assert median.median() == sorted(values)[len(values) // 2]
        assert len(median) == len(values)
