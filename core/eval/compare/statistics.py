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
the exact binomial test on the discordant pairs (scipy's `binomtest`).
"""

from __future__ import annotations

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
    `improved` items that passed only in B (1.0 when there are none)."""
    if regressed < 0 or improved < 0:
        raise ValueError(f"counts must not be negative: {regressed}, {improved}")
    if regressed + improved == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(improved, regressed + improved, 0.5).pvalue)


__all__ = [
    "LEVEL",
    "METHOD",
    "RESAMPLES",
    "PairedDifference",
    "mcnemar_exact_p",
    "paired_difference",
]
