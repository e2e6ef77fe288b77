"""Distributions over many rollouts: each phase's duration, the total, model-call latency,
tokens per rollout and reward, as histograms with their p50, p95 and p99.

Every value keeps the rollout it came from, so that a bin names exactly its rollouts (the
dashboard filters its table to them). A phase's duration is from its mark to the next mark,
as the details and the waterfall count it (`core.eval.timing.waterfall`), and only once the
next phase has begun: a phase still going on has no duration yet. No Textual here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from core.eval.count_text import compact_count
from core.eval.duration_text import duration
from core.phases import PHASES
from core.rollout_record import RolloutRecord
from core.types import PHASE_ORDER, RolloutStatus

#: (rollout id, value): one value and the rollout it belongs to.
Sample = tuple[str, float]
#: The percentiles shown beside each histogram.
PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class Metric:
    """One distribution: its key, its title, its unit, and its values of one rollout."""

    key: str
    title: str
    #: "s" (durations), "tokens" or "" (reward).
    unit: str
    values: Callable[[RolloutRecord], Iterable[float]]
    #: The narrowest bin worth drawing: what a bin's range is written to (a hundredth of a
    #: second, a token, a hundredth of a reward).
    resolution: float = 0.01


#: The place in the lifecycle of a status after every phase (failure, cancelled), as the
#: record's timeline sorts it.
_LAST = len(PHASE_ORDER)


def _phase(phase: RolloutStatus) -> Callable[[RolloutRecord], Iterable[float]]:
    """A phase's duration: from its mark to the next mark of the record's timeline (the
    phase or terminal status after it that is known). Found without sorting the timeline:
    a distribution reads every record of a 10,000-rollout run once a second."""
    rank = PHASE_ORDER[phase]

    def values(record: RolloutRecord) -> Iterable[float]:
        times = record.marks.times()
        began = next((at for status, at in times if status is phase), None)
        if began is None:
            return ()
        following = min(
            (
                (PHASE_ORDER.get(status, _LAST), at)
                for status, at in times
                if PHASE_ORDER.get(status, _LAST) > rank
            ),
            default=None,
        )
        if following is None or following[1] < began:
            return ()
        return (following[1] - began,)

    return values


def _total(record: RolloutRecord) -> Iterable[float]:
    end = record.terminal_at
    if end is None or record.admission_error is not None:
        return ()
    return (max(0.0, end - record.submitted_at),)


def _latencies(record: RolloutRecord) -> Iterable[float]:
    activity = record.model
    return (call.latency_sec for call in activity.recent if call.latency_sec is not None)


def _tokens(record: RolloutRecord) -> Iterable[float]:
    tokens = record.model.tokens
    return () if tokens is None else (float(tokens),)


def _reward(record: RolloutRecord) -> Iterable[float]:
    if not record.finished:
        return ()
    result = record.result_head
    reward = result.reward if result is not None else None
    return () if reward is None or not math.isfinite(reward) else (reward,)


METRICS: tuple[Metric, ...] = (
    *(Metric(phase.value, f"{phase.value} phase", "s", _phase(phase)) for phase in PHASES),
    Metric("total", "total duration", "s", _total),
    Metric("latency", "model-call latency", "s", _latencies),
    Metric("tokens", "tokens per rollout", "tokens", _tokens, resolution=1.0),
    Metric("reward", "reward", "", _reward),
)
METRIC_KEYS = tuple(metric.key for metric in METRICS)


def percentile(ordered: list[float], q: float) -> float:
    """The `q`-th percentile (0–100) of the sorted, non-empty `ordered`: linear between the
    two closest ranks, as numpy's default and `statistics.quantiles(method="inclusive")`."""
    if not ordered:
        raise ValueError("no values")
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Bin:
    """One bar of a histogram: its values in [`low`, `high`) (the last bin holds `high`
    too), and the rollouts they came from."""

    low: float
    high: float
    count: int
    rollout_ids: frozenset[str]


@dataclass(frozen=True)
class Distribution:
    """One metric over the rollouts given: its histogram and percentiles."""

    metric: Metric
    count: int
    bins: tuple[Bin, ...]
    #: (q, value) for each of `PERCENTILES`; empty without values.
    percentiles: tuple[tuple[int, float], ...]
    low: float | None
    high: float | None

    def bin_of(self, value: float) -> int | None:
        """The index of the bin `value` falls in, by the rule that filled them; None
        without bins."""
        bins = self.bins
        if not bins:
            return None
        width = bins[0].high - bins[0].low
        if width <= 0:
            return 0
        return _index(value, bins[0].low, width, len(bins))


def nice_width(raw: float, resolution: float = 0.0) -> float:
    """The smallest of 1, 2, 2.5 and 5 times a power of ten that is at least `raw` (> 0)
    and a whole number of `resolution`s (2.5 tokens is no width: 25 is): bins whose edges
    read as round numbers."""
    power = 10.0 ** math.floor(math.log10(raw))
    while True:
        for step in (1.0, 2.0, 2.5, 5.0):
            width = step * power
            whole = resolution <= 0 or abs(width / resolution - round(width / resolution)) < 1e-6
            if width >= raw * (1 - 1e-9) and whole:
                return width
        power *= 10.0


def _index(value: float, start: float, width: float, count: int) -> int:
    """The bin of `value` among `count` of `width` from `start`. A value a billionth of a
    bin short of an edge is on it: 0.3 / 0.1 is 2.9999…, and a latency of 6.1 − 5.5 on a
    monotonic clock that reads 5,000 is 0.59999999999945; both belong to the bin that starts
    there. Outside values (a float's rounding at either end) go to the first or the last."""
    return min(max(math.floor((value - start) / width + 1e-9), 0), count - 1)


def histogram(samples: list[Sample], bins: int, resolution: float = 0.0) -> tuple[Bin, ...]:
    """`samples` in at most `bins` bins of one round width (`nice_width`), at least
    `resolution` wide, the first starting at a multiple of the width at or below the least
    value; the last holds its upper edge too. Values all equal: one bin, from it to it."""
    if not samples:
        return ()
    low = min(value for _rid, value in samples)
    high = max(value for _rid, value in samples)
    if high == low:
        return (Bin(low, high, len(samples), frozenset(rid for rid, _value in samples)),)
    bins = max(1, bins)
    width = nice_width(max((high - low) / bins, resolution), resolution)
    while True:
        start = math.floor(low / width + 1e-9) * width
        count = max(1, math.ceil((high - start) / width - 1e-9))
        if count <= bins:
            break
        width = nice_width(width * 1.001, resolution)  # the next round width up
    members: list[list[Sample]] = [[] for _ in range(count)]
    for sample in samples:
        members[_index(sample[1], start, width, count)].append(sample)
    return tuple(
        Bin(
            low=start + index * width,
            high=start + (index + 1) * width,
            count=len(found),
            rollout_ids=frozenset(rid for rid, _value in found),
        )
        for index, found in enumerate(members)
    )


def samples_of(metric: Metric, records: Iterable[RolloutRecord]) -> list[Sample]:
    """Every value of `metric` among `records`, each with its rollout."""
    return [(r.rollout_id, value) for r in records for value in metric.values(r)]


def distribution(metric: Metric, records: Iterable[RolloutRecord], bins: int) -> Distribution:
    """`metric` over `records` in at most `bins` bins."""
    return distribution_of(metric, samples_of(metric, records), bins)


def distribution_of(metric: Metric, samples: list[Sample], bins: int) -> Distribution:
    """`metric`'s `samples` (`samples_of`) in at most `bins` bins; with 0, only the count,
    the range and the percentiles."""
    ordered = sorted(value for _rid, value in samples)
    return Distribution(
        metric=metric,
        count=len(samples),
        bins=histogram(samples, bins, metric.resolution) if bins else (),
        percentiles=tuple((q, percentile(ordered, q)) for q in PERCENTILES) if ordered else (),
        low=ordered[0] if ordered else None,
        high=ordered[-1] if ordered else None,
    )


def value_text(metric: Metric, value: float) -> str:
    """A value of `metric` as a bin's range shows it: seconds to the hundredth below 10 s
    (bins are often that narrow), tokens as counts, rewards to two places."""
    if metric.unit == "s":
        return f"{value:.2f}s" if value < 10 else duration(value)
    if metric.unit == "tokens":
        return compact_count(round(value))
    return f"{value:.2f}"


def bin_label(metric: Metric, found: Bin) -> str:
    return f"{value_text(metric, found.low)}–{value_text(metric, found.high)}"


__all__ = [
    "METRICS",
    "METRIC_KEYS",
    "PERCENTILES",
    "Bin",
    "Distribution",
    "Metric",
    "Sample",
    "bin_label",
    "distribution",
    "distribution_of",
    "histogram",
    "nice_width",
    "percentile",
    "samples_of",
    "value_text",
]
