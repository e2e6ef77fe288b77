"""`metrics.json` of an eval run (EVAL.md §6), computed from the final item results.

The counting follows the Osmosis platform's summary, so that a local number and the
platform's agree:

- Only finished items are samples. A pending item (never run, cancelled, or cut off by an
  interrupt) counts nowhere: not in `total_samples`, not as failed, not in pass@k. So an
  incomplete run reports on what it finished, and `total_items` only bounds the count.
- `total_samples` = finished items (success + failed + skipped); `skipped` = successes the
  workflow removed from the samples; `completed_samples` = `total_samples - skipped`.
- Skipped items are not samples either way: they are out of `graded`, `passed`,
  `reward_stats` and pass@k. Their tokens were spent, so they count in `tokens_used`.
- `graded` = non-skipped items with a reward; `passed` = those with `reward >= threshold`.
  A failed item without a reward is a non-pass, so `pass_rate` = `passed /
  completed_samples` is not flattered by rows that broke. `pass_rate` is 0.0 when there are
  no completed samples.
- `reward_stats`: mean, median, population std, min and max of the graded rewards; all null
  when nothing was graded.
- `pass_at_k` (only when `n >= 2`, else `[]`): for k = 1, 2, 4, ... <= n, the unbiased
  estimator `1 - C(a - c, k) / C(a, k)` per row, with `a` the row's finished non-skipped
  attempts and `c` its passes, averaged over the rows with `a >= k`. In a complete run
  without skips `a = n` for every row; rows short of k attempts (pending or skipped ones)
  are left out of that k rather than guessed. A k no row qualifies for is left out.

`progress()` counts a run in flight by the same rules (the dashboard's progress line, live and
replayed), so its pass rate is the one `metrics.json` will say.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.eval.results.records import ItemKey, ItemResult, iso_utc

#: The reward a sample needs to pass when neither the config nor the flags say (as official).
DEFAULT_PASS_THRESHOLD = 1.0


def pass_at_k(attempts: int, passes: int, k: int) -> float:
    """Unbiased pass@k of one row: the chance that k of its attempts, drawn without
    replacement, include a pass (Chen et al., 2021)."""
    if not 0 <= passes <= attempts or not 1 <= k <= attempts:
        raise ValueError(
            f"need 0 <= passes <= attempts and 1 <= k <= attempts: {passes}, {attempts}, {k}"
        )
    # Exact integers, then one division: no cancellation error for large attempt counts.
    return 1.0 - math.comb(attempts - passes, k) / math.comb(attempts, k)


def _ks(n: int) -> list[int]:
    ks: list[int] = []
    k = 1
    while k <= n:
        ks.append(k)
        k *= 2
    return ks


def _reward_stats(rewards: list[float]) -> dict[str, float | None]:
    if not rewards:
        return {"mean": None, "median": None, "std": None, "min": None, "max": None}
    return {
        "mean": statistics.fmean(rewards),
        "median": float(statistics.median(rewards)),
        "std": statistics.pstdev(rewards),
        "min": min(rewards),
        "max": max(rewards),
    }


def _final(results: Iterable[ItemResult]) -> dict[ItemKey, ItemResult]:
    """One result per work item: a repeated key (straight from a journal) keeps the last."""
    return {result.key: result for result in results}


@dataclass
class _Tally:
    """What the summary and the progress line are both counted from (module docstring)."""

    total: int = 0
    skipped: int = 0
    failed: int = 0
    passed: int = 0
    tokens_used: int = 0
    rewards: list[float] = field(default_factory=list)
    #: Per row: finished non-skipped attempts, and how many of them passed.
    attempts: dict[int, int] = field(default_factory=dict)
    passes: dict[int, int] = field(default_factory=dict)

    @property
    def completed(self) -> int:
        return self.total - self.skipped


def _tally(final: Iterable[ItemResult], pass_threshold: float) -> _Tally:
    tally = _Tally()
    for result in final:
        tally.total += 1
        if result.tokens is not None:
            tally.tokens_used += result.tokens
        if result.status == "skipped":
            tally.skipped += 1
            continue
        if result.status == "failed":
            tally.failed += 1
        passing = False
        if result.reward is not None:
            tally.rewards.append(result.reward)
            passing = result.reward >= pass_threshold
            tally.passed += passing
        row = result.row_index
        tally.attempts[row] = tally.attempts.get(row, 0) + 1
        tally.passes[row] = tally.passes.get(row, 0) + passing
    return tally


def compute_metrics(
    results: Iterable[ItemResult], *, total_items: int, n: int, pass_threshold: float
) -> dict[str, Any]:
    """The `summary` object of `metrics.json` (see the module docstring for the rules).

    `results` may repeat a key (e.g. straight from a journal); the last one wins, as in
    `Journal.load`. `total_items` is the number of work items in the run, pending included.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    final = _final(results)
    if len(final) > total_items:
        raise ValueError(f"{len(final)} finished items but only {total_items} work items")
    tally = _tally(final.values(), pass_threshold)

    pass_at: list[dict[str, Any]] = []
    if n >= 2:
        for k in _ks(n):
            values = [
                pass_at_k(a, tally.passes[row], k) for row, a in tally.attempts.items() if a >= k
            ]
            if values:
                pass_at.append({"k": k, "value": statistics.fmean(values)})

    completed = tally.completed
    return {
        "total_samples": tally.total,
        "skipped": tally.skipped,
        "completed_samples": completed,
        "failed": tally.failed,
        "graded": len(tally.rewards),
        "passed": tally.passed,
        "pass_rate": tally.passed / completed if completed else 0.0,
        "pass_threshold": pass_threshold,
        "tokens_used": tally.tokens_used,
        "reward_stats": _reward_stats(tally.rewards),
        "n_runs": n,
        "pass_at_k": pass_at,
    }


@dataclass(frozen=True)
class Progress:
    """How far a run is and how it does so far, counted as `metrics.json` counts."""

    done: int
    """Finished work items (`total_samples`)."""
    total: int
    """Work items in the run, pending included."""
    passed: int
    completed: int
    """Finished items that are samples (`completed_samples`: not skipped)."""
    rewards_sum: float
    rewards_count: int
    """Graded samples (`graded`)."""

    @property
    def pass_rate(self) -> float | None:
        """`passed / completed`; None until a sample completed (metrics.json says 0.0)."""
        return self.passed / self.completed if self.completed else None

    @property
    def mean_reward(self) -> float | None:
        return self.rewards_sum / self.rewards_count if self.rewards_count else None


def progress(results: Iterable[ItemResult], *, total_items: int, pass_threshold: float) -> Progress:
    """The progress of a run from the results it has so far (a repeated key keeps the last):
    the numbers its `metrics.json` has, or will have, for the same results and threshold."""
    tally = _tally(_final(results).values(), pass_threshold)
    return Progress(
        done=tally.total,
        total=total_items,
        passed=tally.passed,
        completed=tally.completed,
        rewards_sum=sum(tally.rewards),
        rewards_count=len(tally.rewards),
    )


def recorded_pass_threshold(document: object) -> float | None:
    """The threshold a `metrics.json` document was computed with, if it says one."""
    summary = document.get("summary") if isinstance(document, dict) else None
    threshold = summary.get("pass_threshold") if isinstance(summary, dict) else None
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        return None
    return float(threshold)


def metrics_document(
    summary: Mapping[str, Any],
    *,
    run_name: str,
    status: str,
    dataset_name: str,
    model_name: str,
    rollout_name: str,
    started_at: str | datetime,
    completed_at: str | datetime | None,
    duration_ms: int,
) -> dict[str, Any]:
    """The whole `metrics.json`: `{eval_run: {...}, summary: {...}}`.

    Datetimes are written as ISO 8601 UTC; `completed_at` is null for a run that has not
    ended (a snapshot taken while it runs).
    """

    def stamp(moment: str | datetime | None) -> str | None:
        return iso_utc(moment) if isinstance(moment, datetime) else moment

    return {
        "eval_run": {
            "name": run_name,
            "status": status,
            "dataset_name": dataset_name,
            "model_name": model_name,
            "rollout_name": rollout_name,
            "duration_ms": duration_ms,
            "started_at": stamp(started_at),
            "completed_at": stamp(completed_at),
        },
        "summary": dict(summary),
    }


__all__ = [
    "DEFAULT_PASS_THRESHOLD",
    "Progress",
    "compute_metrics",
    "metrics_document",
    "pass_at_k",
    "progress",
    "recorded_pass_threshold",
]
