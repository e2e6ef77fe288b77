"""How a run counts its rows' attempts: how many each row gets (`n`) and the reward that
passes. The dashboard's rows × attempts grid reads it from any source: a live run knows it
from its plan; a replayed or attached one, from its run folder's files, by the rule the
replay's progress line has always used for the threshold (`recorded_pass_rule`).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.eval.results.metrics import DEFAULT_PASS_THRESHOLD, recorded_pass_threshold
from core.eval.results.provenance import manifest_pass_threshold
from core.eval.untrusted_json import is_int


@dataclass(frozen=True)
class PassRule:
    """A run's attempts per row and pass threshold."""

    n: int | None
    """Attempts per dataset row; None when the run's files do not say (the grid then counts
    the attempts it has seen)."""
    threshold: float
    """A graded sample passes at this reward or above (`core.eval.results.metrics.is_pass`)."""


def recorded_pass_rule(metrics: object, manifest: object) -> PassRule:
    """The rule a run folder's documents say (each None when absent or unreadable): the
    threshold of its `metrics.json` (the latest invocation's), else the one its manifest was
    created with, else the default (a run of a version that recorded none); `n` as its
    manifest's `inputs` say."""
    threshold = recorded_pass_threshold(metrics)
    if threshold is None:
        threshold = manifest_pass_threshold(manifest)
    inputs = manifest.get("inputs") if isinstance(manifest, dict) else None
    n = inputs.get("n") if isinstance(inputs, dict) else None
    return PassRule(
        n if is_int(n) and n >= 1 else None,
        DEFAULT_PASS_THRESHOLD if threshold is None else threshold,
    )
