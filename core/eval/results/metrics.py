"""`metrics.json` of an eval run (EVAL.md §8): `{"eval_run": {...}, "summary": {...}}`.

The summary is computed from the index rows (`core.eval.results.index`), with the rules,
keys, order and number forms of the official tool (which follows the Osmosis platform, so a
local number and the platform's agree); nothing is rounded:

- Only finished items are samples: a pending item (never run, cancelled, cut off) counts
  nowhere. `total_samples` = index rows; `skipped` = rows whose workflow removed the sample;
  `failed` = failed rows; `completed_samples` = `total_samples - skipped`.
- `graded` = non-skipped rows with a reward (a failed row with one counts); `passed` = those
  with `reward >= pass_threshold`; `pass_rate` = `passed / completed_samples`, or the integer
  `0` when there are none. A failed row without a reward is a non-pass.
- `tokens_used` = all rows' tokens, skipped ones too (they were spent).
- `reward_stats` {mean, median, std (population; 0.0 for one reward), min, max}: only when
  at least one row was graded; finite however large the rewards
  (`core.eval.results.reward_stats`). Every number written is finite: a reward is (the client
  refuses a result whose reward is not, and so does the journal), and so are the statistics.
- `n_runs` = the highest `run_index` + 1, only when that is at least 2; then `pass_at_k`,
  for k = 1, 2, 4, ... <= n_runs, the unbiased estimator `1 - C(a - p, k) / C(a, k)` per row
  (`a` its non-skipped attempts, `p` its passes) averaged over the rows with `a >= k`; only
  when at least two such points exist.

`progress()` counts a run in flight by the same rules (the dashboard's progress line, live and
replayed), so its pass rate is the one `metrics.json` will say; it also says what is left
(work in flight, stuck, not dispatched yet) and how long that will take (`Progress.eta_sec`).

`eval_run`: `id` (the manifest's `local_run_id`), `status` (`running` while the run lives,
`finished` when every item has a result and nothing was interrupted, else `incomplete`),
`name`, `dataset_name`, `model_name`, `rollout_name`, `duration_ms` (this invocation's, 0.0
while it runs), `started_at` (this invocation's start) and `completed_at` (only `finished`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from core.eval.results import reward_stats
from core.eval.results.records import ItemResult
from core.eval.untrusted_json import is_number
from core.types import failure_category

RunState = Literal["running", "finished", "incomplete"]

#: The reward a sample needs to pass when neither the config nor the flags say (as official).
DEFAULT_PASS_THRESHOLD = 1.0


def pass_at_k(attempts: int, passes: int, k: int) -> float:
    """Unbiased pass@k of one row: the chance that k of its attempts, drawn without
    replacement, include a pass (Chen et al., 2021).

    As the product `prod((a - p - i) / (a - i) for i < k)`, the form the official tool uses,
    so both tools write the same float for the same results.
    """
    if not 0 <= passes <= attempts or not 1 <= k <= attempts:
        raise ValueError(
            f"need 0 <= passes <= attempts and 1 <= k <= attempts: {passes}, {attempts}, {k}"
        )
    if attempts - passes < k:
        return 1.0
    all_fail = 1.0
    for i in range(k):
        all_fail *= (attempts - passes - i) / (attempts - i)
    return 1.0 - all_fail


def is_pass(status: str, reward: object, threshold: float) -> bool:
    """Whether a finished work item passes: not skipped, and graded at or above the threshold
    (a failed item with a reward counts by its reward, as the platform counts it)."""
    return status != "skipped" and is_number(reward) and float(reward) >= threshold


def k_values(n: int) -> list[int]:
    """The k of pass@k reported for `n` attempts: 1, 2, 4, ... up to n."""
    ks: list[int] = []
    k = 1
    while k <= n:
        ks.append(k)
        k *= 2
    return ks


def pass_at_k_points(rows: Sequence[tuple[int, int]], n: int) -> list[tuple[int, float]]:
    """(k, pass@k) for each k of `k_values(n)`: the mean of `pass_at_k` over the rows,
    given as (non-skipped attempts, passes), that have at least k attempts; a k that no row
    reaches is left out. `metrics.json`'s `pass_at_k`, and the dashboard's attempts grid."""
    points: list[tuple[int, float]] = []
    for k in k_values(n):
        values = [pass_at_k(attempts, passes, k) for attempts, passes in rows if attempts >= k]
        if values:
            points.append((k, statistics.fmean(values)))
    return points


@dataclass
class _Tally:
    """What the summary and the progress line are both counted from (module docstring)."""

    threshold: float
    total: int = 0
    skipped: int = 0
    failed: int = 0
    passed: int = 0
    tokens_used: int = 0
    max_run: int = -1
    rewards: list[float] = field(default_factory=list)
    #: Per row: finished non-skipped attempts, and how many of them passed.
    attempts: dict[int, int] = field(default_factory=dict)
    passes: dict[int, int] = field(default_factory=dict)

    @property
    def completed(self) -> int:
        return self.total - self.skipped

    def add(self, row: int, run: int, status: str, *, reward: object, tokens: object) -> None:
        self.total += 1
        self.max_run = max(self.max_run, run)
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            self.tokens_used += tokens
        if status == "skipped":
            self.skipped += 1
            return
        if status == "failed":
            self.failed += 1
        passing = is_pass(status, reward, self.threshold)
        if is_number(reward):
            self.rewards.append(float(reward))
            self.passed += passing
        self.attempts[row] = self.attempts.get(row, 0) + 1
        self.passes[row] = self.passes.get(row, 0) + passing


#: What the summary counts of one index row: its row_index, run_index, status, reward and
#: tokens (None when the row has none).
SummaryFields = tuple[int, int, str, object, object]


def summarize(rows: Iterable[Mapping[str, Any]], *, pass_threshold: float) -> dict[str, Any]:
    """The `summary` of `metrics.json` for index rows (see the module docstring)."""
    fields = (
        (row["row_index"], row["run_index"], row["status"], row.get("reward"), row.get("tokens"))
        for row in rows
    )
    return summarize_fields(fields, pass_threshold=pass_threshold)


def summarize_fields(rows: Iterable[SummaryFields], *, pass_threshold: float) -> dict[str, Any]:
    """`summarize` of rows given by the fields it counts, without building their dicts (a
    refresh of a big run summarises every item)."""
    tally = _Tally(pass_threshold)
    for row_index, run_index, status, reward, tokens in rows:
        tally.add(row_index, run_index, status, reward=reward, tokens=tokens)
    completed = tally.completed
    summary: dict[str, Any] = {
        "total_samples": tally.total,
        "completed_samples": completed,
        "graded": len(tally.rewards),
        "passed": tally.passed,
        "failed": tally.failed,
        "skipped": tally.skipped,
        "pass_rate": tally.passed / completed if completed else 0,
        "pass_threshold": float(pass_threshold),
        "tokens_used": tally.tokens_used,
    }
    rewards = tally.rewards
    if rewards:
        summary["reward_stats"] = {
            "mean": reward_stats.mean(rewards),
            "median": reward_stats.median(rewards),
            "std": reward_stats.pstdev(rewards) if len(rewards) > 1 else 0.0,
            "min": min(rewards),
            "max": max(rewards),
        }
    n_runs = tally.max_run + 1
    if n_runs >= 2:
        summary["n_runs"] = n_runs
        graded = [(tally.attempts[row], tally.passes[row]) for row in sorted(tally.attempts)]
        points = pass_at_k_points(graded, n_runs)
        if len(points) >= 2:
            summary["pass_at_k"] = [{"k": k, "value": value} for k, value in points]
    return summary


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
    mean_reward: float | None
    """The graded samples' mean reward (`reward_stats.mean`); None until one was graded."""
    rewards_count: int
    """Graded samples (`graded`)."""
    in_flight: int = 0
    """Work items with a rollout in flight now."""
    stuck: int = 0
    """Of those, the ones stuck in their phase."""
    overdue: int = 0
    """Of those, the ones whose end cannot be foreseen: the stuck ones, and those running far
    longer than finished items took (`progress()` counts the stuck ones in)."""
    not_dispatched: int = 0
    """Work items not sent to a server yet (those sent again after a server was lost too)."""
    carried: int = 0
    """Of `done`, the results carried over from before this invocation (a resume): they
    finished then, so no rate of this session's is counted from them."""
    carried_success: int = 0
    """Of `carried`, those whose rollout ended `success` (a removed sample's too). Neither
    they nor the failed ones are on this session's board: the summary's status chips add
    them to the board's counts, so that the chips count the run, as the progress does."""
    carried_failures: Mapping[str, int] = field(default_factory=dict)
    """Of `carried`, the failed ones per failure category (`core.types.failure_category`),
    for the summary's failures line."""

    @property
    def carried_failed(self) -> int:
        return sum(self.carried_failures.values())

    @property
    def done_here(self) -> int:
        """Work items finished by this invocation: what its rate and ETA are counted from."""
        return self.done - self.carried

    @property
    def pass_rate(self) -> float | None:
        """`passed / completed`; None until a sample completed (metrics.json says 0)."""
        return self.passed / self.completed if self.completed else None

    @property
    def left(self) -> int:
        """The work still to do: in flight, or not dispatched yet."""
        return self.in_flight + self.not_dispatched

    @property
    def stalled(self) -> bool:
        """Everything in flight is stuck: nothing moves until one of them ends or is
        cancelled (with work not dispatched yet, every slot is held by a stuck rollout)."""
        return self.in_flight > 0 and self.stuck >= self.in_flight

    def eta_sec(self, items_per_sec: float | None) -> float | None:
        """How long what is left takes at `items_per_sec` finished work items a second, the
        overdue rollouts aside (their end is unknown: the time is then a lower bound); None
        when it cannot be told (no recent rate, or nothing but overdue work is left)."""
        foreseeable = self.left - max(self.overdue, self.stuck)
        if foreseeable <= 0:
            return 0.0 if self.left == 0 else None
        if not items_per_sec or items_per_sec <= 0:
            return None
        return foreseeable / items_per_sec


def progress(
    results: Iterable[ItemResult],
    *,
    total_items: int,
    pass_threshold: float,
    in_flight: int = 0,
    stuck: int = 0,
    overdue: int | None = None,
    not_dispatched: int | None = None,
    carried: Iterable[ItemResult] = (),
) -> Progress:
    """The progress of a run from the results it has so far (a repeated key keeps the last):
    the numbers its `metrics.json` has, or will have, for the same results and threshold.

    `in_flight`, `stuck` and `overdue` are the work items' rollouts in flight, stuck, and
    with an end nobody can foresee now (by default, the stuck ones); `not_dispatched`, when
    the caller knows it, the work items not sent yet (by default, the items neither finished
    nor in flight); `carried`, of the results, those from before this invocation."""
    carried = list(carried)
    failures = Counter(
        failure_category(result.error_type) for result in carried if result.status == "failed"
    )
    tally = _Tally(pass_threshold)
    for result in {result.key: result for result in results}.values():
        tally.add(
            result.row_index,
            result.run_index,
            result.status,
            reward=result.reward,
            tokens=result.tokens,
        )
    if not_dispatched is None:
        not_dispatched = max(total_items - tally.total - in_flight, 0)
    return Progress(
        done=tally.total,
        total=total_items,
        passed=tally.passed,
        completed=tally.completed,
        mean_reward=reward_stats.mean(tally.rewards) if tally.rewards else None,
        rewards_count=len(tally.rewards),
        in_flight=in_flight,
        stuck=stuck,
        overdue=stuck if overdue is None else overdue,
        not_dispatched=not_dispatched,
        carried=len(carried),
        carried_success=sum(result.status != "failed" for result in carried),
        carried_failures=dict(failures),
    )


def recorded_pass_threshold(document: object) -> float | None:
    """The threshold a `metrics.json` document was computed with, if it says one."""
    summary = document.get("summary") if isinstance(document, dict) else None
    threshold = summary.get("pass_threshold") if isinstance(summary, dict) else None
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        return None
    return float(threshold)


@dataclass(frozen=True)
class RunIdentity:
    """What `eval_run` says about the run besides its state."""

    local_run_id: str
    run_name: str
    dataset_name: str
    model_name: str
    rollout_name: str
    started_at: str
    """This invocation's start (ISO 8601 UTC, `core.eval.results.records.iso_utc`)."""


def metrics_document(
    summary: Mapping[str, Any],
    identity: RunIdentity,
    *,
    state: RunState,
    duration_ms: float = 0.0,
    completed_at: str | None = None,
) -> dict[str, Any]:
    """The whole `metrics.json`; `completed_at` is written for a `finished` run only."""
    eval_run: dict[str, Any] = {
        "id": identity.local_run_id,
        "status": state,
        "name": identity.run_name,
        "dataset_name": identity.dataset_name,
        "model_name": identity.model_name,
        "rollout_name": identity.rollout_name,
        "duration_ms": float(duration_ms),
        "started_at": identity.started_at,
        "completed_at": completed_at if state == "finished" else None,
    }
    return {
        "eval_run": {key: value for key, value in eval_run.items() if value is not None},
        "summary": dict(summary),
    }


__all__ = [
    "DEFAULT_PASS_THRESHOLD",
    "Progress",
    "RunIdentity",
    "RunState",
    "SummaryFields",
    "is_pass",
    "k_values",
    "metrics_document",
    "pass_at_k",
    "pass_at_k_points",
    "progress",
    "recorded_pass_threshold",
    "summarize",
    "summarize_fields",
]
