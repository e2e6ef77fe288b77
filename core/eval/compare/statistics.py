"""The paired statistics of a comparison: an interval for a difference, and an exact test.

Both runs answer the same rows, so the rows are the unit: each row gives one difference
(B's value minus A's: its pass fraction over its attempts, or its mean reward), and the
interval is a **paired bootstrap over rows**: the rows are resampled with replacement
`RESAMPLES` times (2,000: the percentiles then move by a few hundredths of their width from one
seed to another, and a run of 100,000 rows with continuous rewards still takes under a second),
and the 2.5th and 97.5th percentiles of the resampled mean difference bound
the 95 % interval. Resampling rows, not work items, keeps the attempts of one row together, so
a row tried four times weighs as one row, as it should. The generator is seeded: the same two
runs always give the same interval.

A resampled mean depends only on how often each distinct difference was drawn, so when the
differences take few values (pass fractions always do; rewards usually do) the draw is one
multinomial per resample over those values — the same distribution as drawing row indices,
at a cost that does not grow with the number of rows. Otherwise rows are drawn in chunks.

For a binary outcome with one attempt per row, McNemar's exact test gives the chance of a
split of regressed against improved items at least this uneven if B were no better than A:
the exact binomial test on the discordant pairs, computed here (`mcnemar_exact_p`): scipy's
`binomtest` gives the same to twelve digits (a test checks it), but importing `scipy.stats`
took a tenth of a compare of two runs of 100,000 items.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

RESAMPLES = 2_000
SEED = 0
LEVEL = 0.95
#: Up to this many distinct differences, a resample is one multinomial draw over them.
MULTINOMIAL_VALUES = 512
#: Row indices drawn at once when resampling rows one by one: bounds the memory it takes, and
#: keeps each chunk's arrays (8 MB) small enough for the allocator to reuse; at 4,000,000 each
#: was a fresh 32 MB mapping, and 100,000 rows took a fifth longer (bench/compare_runs.py). The
#: draws are the same whatever the chunk: one stream, read in order.
DRAWS_PER_CHUNK = 1_000_000
METHOD = (
    f"paired bootstrap over rows ({RESAMPLES:,} resamples, seed {SEED}), "
    f"{LEVEL:.0%} percentile interval"
)


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """The mean of A's and of B's per-row values over the same rows, B minus A, and its
    interval."""

    rows: int
    a: float
    b: float
    difference: float
    low: float
    high: float

    @property
    def within_noise(self) -> bool:
        """True when the interval holds no difference at all (0)."""
        return self.low <= 0.0 <= self.high


def paired_difference(a: Sequence[float], b: Sequence[float]) -> PairedDifference | None:
    """The paired bootstrap interval of mean(b) - mean(a); None for no rows. `a[i]` and
    `b[i]` are the same row's values in the two runs."""
    if len(a) != len(b):
        raise ValueError(f"paired values must be as many: {len(a)} and {len(b)}")
    if not a:
        return None
    first, second = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    differences = second - first
    means = _resampled_means(differences)
    low, high = np.quantile(means, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    difference = float(differences.mean())
    # A resampled mean is a float sum: where every resample is the same, the percentiles may
    # differ from the mean in the last bit; the interval always holds the estimate.
    return PairedDifference(
        rows=len(a),
        a=float(first.mean()),
        b=float(second.mean()),
        difference=difference,
        low=min(float(low), difference),
        high=max(float(high), difference),
    )


def _resampled_means(differences: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    rng = np.random.default_rng(SEED)
    count = len(differences)
    values, frequency = np.unique(differences, return_counts=True)
    if len(values) <= MULTINOMIAL_VALUES:
        draws = rng.multinomial(count, frequency / count, size=RESAMPLES)
        means: npt.NDArray[np.float64] = (draws @ values) / count
        return means
    chunk = max(1, DRAWS_PER_CHUNK // count)
    parts = []
    for start in range(0, RESAMPLES, chunk):
        rows = rng.integers(0, count, size=(min(chunk, RESAMPLES - start), count))
        parts.append(differences[rows].mean(axis=1))
    return np.concatenate(parts)


def mcnemar_exact_p(regressed: int, improved: int) -> float:
    """McNemar's exact two-sided p-value for `regressed` items that passed only in A and
    `improved` items that passed only in B (1.0 when there are none).

    Under "B is no better than A" each discordant item is a fair coin, so the p-value is the
    chance of a split at least this uneven either way: twice the binomial tail at the
    smaller count, at most 1 (the fair coin's distribution is symmetric).
    """
    if regressed < 0 or improved < 0:
        raise ValueError(f"counts must not be negative: {regressed}, {improved}")
    discordant = regressed + improved
    fewer = min(regressed, improved)
    if 2 * fewer == discordant:
        return 1.0
    return min(1.0, 2.0 * _fair_coin_tail(fewer, discordant))


def _fair_coin_tail(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), k < n/2, to about 1e-13 relative.

    Summed from its largest term, P(X = k), down: each term is the one above times
    i / (n - i + 1), and the sum stops when a term no longer changes it. The tail of a million
    items takes a few thousand terms (they fall off past a few standard deviations).
    """
    term = _fair_coin_pmf(k, n)
    total = 0.0
    for i in range(k, -1, -1):
        updated = total + term
        if updated == total:
            break
        total = updated
        term *= i / (n - i + 1)
    return total


def _fair_coin_pmf(k: int, n: int) -> float:
    """P(X = k) for X ~ Binomial(n, 1/2), 0 <= k <= n, to full double precision.

    Catherine Loader's saddle-point form ("Fast and accurate computation of binomial
    probabilities", 2000): written with the Stirling remainders and a deviance term instead
    of log-factorials, whose difference would lose nine digits at n = 200,000.
    """
    if k in (0, n):
        return math.ldexp(1.0, -n)
    half = n / 2
    exponent = (
        _stirling_remainder(n)
        - _stirling_remainder(k)
        - _stirling_remainder(n - k)
        - _deviance(k, half)
        - _deviance(n - k, half)
    )
    return math.exp(exponent) * math.sqrt(n / (2 * math.pi * k * (n - k)))


# 1/12, 1/360, 1/1260, 1/1680, 1/1188: the Stirling series' first coefficients.
_STIRLING_SERIES = (1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188)


def _stirling_remainder(n: int) -> float:
    """ln(n!) - ln(sqrt(2 pi n) (n / e)^n), n >= 1."""
    if n <= 15:  # small enough that the log-factorials lose nothing
        return math.lgamma(n + 1) - (n + 0.5) * math.log(n) + n - 0.5 * math.log(2 * math.pi)
    square = float(n) * n
    c0, c1, c2, c3, c4 = _STIRLING_SERIES
    if n > 500:
        return (c0 - c1 / square) / n
    return (c0 - (c1 - (c2 - (c3 - c4 / square) / square) / square) / square) / n


def _deviance(x: float, mean: float) -> float:
    """x ln(x / mean) + mean - x, without the cancellation when x is near `mean`."""
    if abs(x - mean) < 0.1 * (x + mean):
        ratio = (x - mean) / (x + mean)
        total = (x - mean) * ratio
        power = 2 * x * ratio
        odd = 1
        while True:
            power *= ratio * ratio
            odd += 2
            updated = total + power / odd
            if updated == total:
                return total
            total = updated
    return x * math.log(x / mean) + mean - x


__all__ = [
    "LEVEL",
    "METHOD",
    "RESAMPLES",
    "PairedDifference",
    "mcnemar_exact_p",
    "paired_difference",
]
