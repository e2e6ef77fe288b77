"""When a rollout entered each phase, and why it skipped one: one rule for live handles, the
board and replays."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from core.result_head import ResultHead
from core.types import (
    PHASE_ORDER,
    TERMINAL_STATUSES,
    RolloutErrorCategory,
    RolloutStatus,
)

SkipReason = Literal["not_requested", "ended_early", "not_observed", "not_recorded"]

#: Who reported a status: the server's ownership events, a poll of its result endpoint, or
#: (for `running` only) the rollout's first model call through the run's gateway: a workflow
#: calls the model only while it runs, so the call's start proves it was running by then.
PhaseSource = Literal["server", "poll", "model"]


@dataclass(frozen=True, slots=True)
class PhaseMark:
    """When a rollout got one status, as one source reported it (or as the sources agree)."""

    status: RolloutStatus
    #: When it happened, on the `time.monotonic()` clock: the server's time when the server
    #: reported it (mapped onto this clock), the start of the first model call for a
    #: `running` the gateway proved, else when a poll saw it.
    at: float
    source: PhaseSource
    #: The server's wall clock (seconds since the epoch) and its event's sequence number.
    server_time: float | None = None
    event_sequence: int | None = None
    server_id: str | None = None
    #: When a poll saw the status too (on a mark from the server or a model call), for the
    #: details.
    polled_at: float | None = None

    @property
    def poll_time(self) -> float | None:
        """When a poll saw the status: the mark's own time for a poll's, else `polled_at`
        (what a better source's mark replacing this one keeps)."""
        return self.at if self.source == "poll" else self.polled_at


#: The phases a rollout passes through before its terminal status, in order.
PHASES = tuple(status for status in PHASE_ORDER if status not in TERMINAL_STATUSES)
_ENDED_EARLY = TERMINAL_STATUSES - {RolloutStatus.SUCCESS}
# Failures that only the workflow (or grader) itself produces: the rollout was running.
_RAN = frozenset(
    {
        RolloutErrorCategory.AGENT_ERROR,
        RolloutErrorCategory.VALIDATION_ERROR,
        RolloutErrorCategory.TIMEOUT,
        RolloutErrorCategory.HTTP_ERROR,
    }
)
_NO_GRADING_PREFIX = "grading was requested but"


def reached_phase(result: ResultHead | None) -> RolloutStatus | None:
    """The furthest phase a terminal failure proves was reached, seen or not.

    A failure that carries a sample had a finished workflow, so it was graded (unless the
    server says grading was impossible); one with a workflow's error category had started
    running. Lease expiry and cancellation prove nothing: they can end a queued rollout.
    """
    if result is None or result.status != RolloutStatus.FAILURE:
        return None
    message = result.err_message or ""
    if result.has_sample and not message.startswith(_NO_GRADING_PREFIX):
        return RolloutStatus.GRADING
    if result.err_category in _RAN:
        return RolloutStatus.RUNNING
    return None


def skipped_phases(
    observed: Iterable[RolloutStatus],
    current: RolloutStatus,
    *,
    grade: bool | None,
    result: ResultHead | None = None,
    recorded: bool = True,
) -> dict[RolloutStatus, SkipReason]:
    """Phases among queued/running/grading that were not observed, with the reason.

    `not_requested`: grading on a rollout sent with grade=False. `not_observed`: a later phase
    was observed (or the result proves it was reached, see `reached_phase`), so this one
    happened between two polls. `ended_early`: the rollout failed or was cancelled before
    reaching it. Phases still ahead of an unfinished rollout are not
    listed. `grade=None` means the request is not known (a replay of an old recording).
    `recorded=False`: nobody watched its phases, only its dispatch and result are known (a
    run folder's journal and log without a recording), so each is `not_recorded`.
    """
    if not recorded:
        return {phase: "not_recorded" for phase in PHASES}
    seen = set(observed)
    furthest = max((PHASE_ORDER[s] for s in seen if s in PHASE_ORDER), default=-1)
    proven = reached_phase(result)
    reached = PHASE_ORDER[proven] if proven is not None else -1
    skipped: dict[RolloutStatus, SkipReason] = {}
    for phase in PHASES:
        if phase in seen:
            continue
        if phase is RolloutStatus.GRADING and grade is False:
            skipped[phase] = "not_requested"
        elif PHASE_ORDER[phase] < furthest or PHASE_ORDER[phase] <= reached:
            skipped[phase] = "not_observed"
        elif current in _ENDED_EARLY:
            skipped[phase] = "ended_early"
    return skipped
