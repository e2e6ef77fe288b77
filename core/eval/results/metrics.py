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
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from core.eval.results.records import ItemKey, ItemResult, iso_utc


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


def compute_metrics(
    results: Iterable[ItemResult], *, total_items: int, n: int, pass_threshold: float
) -> dict[str, Any]:
    """The `summary` object of `metrics.json` (see the module docstring for the rules).

    `results` may repeat a key (e.g. straight from a journal); the last one wins, as in
    `Journal.load`. `total_items` is the number of work items in the run, pending included.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    final: dict[ItemKey, ItemResult] = {}
    for result in results:
        final[result.key] = result
    if len(final) > total_items:
        raise ValueError(f"{len(final)} finished items but only {total_items} work items")

    skipped = failed = graded = passed = tokens_used = 0
    rewards: list[float] = []
    attempts: dict[int, int] = {}
    passes: dict[int, int] = {}
    for result in final.values():
        if result.tokens is not None:
            tokens_used += result.tokens
        if result.status == "skipped":
            skipped += 1
            continue
        if result.status == "failed":
            failed += 1
        passing = False
        if result.reward is not None:
            graded += 1
            rewards.append(result.reward)
            passing = result.reward >= pass_threshold
            passed += passing
        attempts[result.row_index] = attempts.get(result.row_index, 0) + 1
        passes[result.row_index] = passes.get(result.row_index, 0) + passing

    pass_at: list[dict[str, Any]] = []
    if n >= 2:
        for k in _ks(n):
            values = [pass_at_k(a, passes[row], k) for row, a in attempts.items() if a >= k]
            if values:
                pass_at.append({"k": k, "value": statistics.fmean(values)})

    total = len(final)
    completed = total - skipped
    return {
        "total_samples": total,
        "skipped": skipped,
        "completed_samples": completed,
        "failed": failed,
        "graded": graded,
        "passed": passed,
        "pass_rate": passed / completed if completed else 0.0,
        "pass_threshold": pass_threshold,
        "tokens_used": tokens_used,
        "reward_stats": _reward_stats(rewards),
        "n_runs": n,
        "pass_at_k": pass_at,
    }


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


__all__ = ["compute_metrics", "metrics_document", "pass_at_k"]
