"""What one finished work item came to, and the class of a pair of them (run A, run B).

An outcome is `pass` (not skipped, graded at or above its run's threshold: the rule
`metrics.json` counts passes by), `error` (the rollout failed: `error_type` says how),
`failure` (it finished but did not pass) or `skipped` (its workflow removed the sample). A
work item without a result (never run, cancelled, cut off) has no outcome: it is pending.

The classes of a pair, in the order a reader wants them:

- `regressed`: passed in A, not in B; `improved`: the reverse;
- `error_changed`: passed in neither, and the error differs: another error type, a failure
  that became an error, or an error that became a plain failure;
- `still_failing`, `still_passing`;
- `pending`: a work item of both runs, unfinished in at least one;
- `skipped`: skipped in either run (not a sample, so neither better nor worse);
- `only_in_A`, `only_in_B`: a work item that one run does not have (another `n`, other rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from core.eval.results.metrics import is_pass
from core.eval.results.records import ItemResult

OutcomeKind = Literal["pass", "failure", "error", "skipped"]

ItemClass = Literal[
    "regressed",
    "improved",
    "error_changed",
    "still_failing",
    "still_passing",
    "pending",
    "skipped",
    "only_in_A",
    "only_in_B",
]
#: Every class, in the order reports list them.
CLASSES: tuple[ItemClass, ...] = get_args(ItemClass)
#: The classes of the items compared: finished, not skipped, in both runs.
COMPARED: tuple[ItemClass, ...] = (
    "regressed",
    "improved",
    "error_changed",
    "still_failing",
    "still_passing",
)
#: The classes that say something changed between the runs.
CHANGED: frozenset[ItemClass] = frozenset({"regressed", "improved", "error_changed"})


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """What a finished work item came to (see the module docstring)."""

    kind: OutcomeKind
    #: Set only for `error`: the rollout's error type, as journaled (None when it gave none).
    error_type: str | None = None

    @property
    def passed(self) -> bool:
        return self.kind == "pass"


#: One object per outcome that carries nothing else: a run of a million items makes no more.
PLAIN_OUTCOMES: dict[OutcomeKind, ItemOutcome] = {
    kind: ItemOutcome(kind) for kind in ("pass", "failure", "skipped")
}


def outcome_kind(status: str, reward: object, threshold: float) -> OutcomeKind:
    """What a finished work item's status and reward came to, passes counted with its run's
    `threshold` (the one rule: a comparison, the baseline column and the rows × attempts grid
    all judge by it)."""
    if status == "skipped":
        return "skipped"
    if is_pass(status, reward, threshold):
        return "pass"
    return "error" if status == "failed" else "failure"


def outcome_of(result: ItemResult, threshold: float) -> ItemOutcome:
    """The outcome of a journaled result, passes counted with its run's `threshold`."""
    return outcome_from(result.status, result.reward, result.error_type, threshold)


def outcome_from(
    status: str, reward: float | None, error_type: str | None, threshold: float
) -> ItemOutcome:
    """The outcome of a work item journaled as `status`, `reward` and `error_type`."""
    kind = outcome_kind(status, reward, threshold)
    if kind == "error":
        return ItemOutcome("error", error_type)
    return PLAIN_OUTCOMES[kind]


def classify(a: ItemOutcome | None, b: ItemOutcome | None) -> ItemClass:
    """The class of a work item both runs have; None is an item without a result."""
    if a is None or b is None:
        return "pending"
    if a.kind == "skipped" or b.kind == "skipped":
        return "skipped"
    if a.passed:
        return "still_passing" if b.passed else "regressed"
    if b.passed:
        return "improved"
    if (a.kind, a.error_type) != (b.kind, b.error_type):
        return "error_changed"
    return "still_failing"


__all__ = [
    "CHANGED",
    "CLASSES",
    "COMPARED",
    "PLAIN_OUTCOMES",
    "ItemClass",
    "ItemOutcome",
    "OutcomeKind",
    "classify",
    "outcome_from",
    "outcome_kind",
    "outcome_of",
]
