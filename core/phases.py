"""Why a rollout skipped a phase: one rule for live handles, the board and replays."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from core.types import PHASE_ORDER, RolloutStatus

SkipReason = Literal["not_requested", "ended_early", "not_observed"]

PHASES = (RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.GRADING)
_ENDED_EARLY = frozenset({RolloutStatus.FAILURE, RolloutStatus.CANCELLED})


def skipped_phases(
    observed: Iterable[RolloutStatus], current: RolloutStatus, *, grade: bool | None
) -> dict[RolloutStatus, SkipReason]:
    """Phases among queued/running/grading that were not observed, with the reason.

    `not_requested`: grading on a rollout sent with grade=False. `not_observed`: a later phase
    was observed, so this one happened between two polls. `ended_early`: the rollout failed or
    was cancelled before reaching it. Phases still ahead of an unfinished rollout are not
    listed. `grade=None` means the request is not known (a replay of an old recording).
    """
    seen = set(observed)
    furthest = max((PHASE_ORDER[s] for s in seen if s in PHASE_ORDER), default=-1)
    skipped: dict[RolloutStatus, SkipReason] = {}
    for phase in PHASES:
        if phase in seen:
            continue
        if phase is RolloutStatus.GRADING and grade is False:
            skipped[phase] = "not_requested"
        elif PHASE_ORDER[phase] < furthest:
            skipped[phase] = "not_observed"
        elif current in _ENDED_EARLY:
            skipped[phase] = "ended_early"
    return skipped
