"""The waterfall of one rollout: where its time went, as segments on one time axis.

Read from the rollout's record alone, so a live run's, an attached dashboard's and a
replay's look the same (each board keeps the same facts: `submitted_at`, the phase marks
with their sources, the model calls, the terminal status):

- the client's wait for admission: from sending `POST /rollout` (the record's
  `submitted_at`) until the server's answer (its first observed status), 429 retries
  included; a replay knows no send time, so it has none;
- each server phase (queued, running, grading) from its mark to the next one's, with the
  mark's source (the server's event: exact; a poll or a model call: an upper bound), and
  the phases no source saw with the reason (`core.phases.skipped_phases`);
- every model call the board keeps (latency, tokens, status), and the idle gaps between
  them;
- the terminal mark;
- the sub-phases a rollout server's backend left in `diagnostics.json`
  (`core.eval.results.diagnostics`): durations without start times, so they are placed
  end to end, ending where the grading mark is when the verifier is among them (Harbor
  reports `grading` as its verifier starts), else at the terminal mark.

Times are seconds from the waterfall's origin: the earliest thing known of the rollout.
No Textual here: the dashboard draws it (tui/widgets/waterfall.py), a report may too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from core.eval.results.diagnostics import TrialDiagnostics
from core.model_activity import ModelCallReport
from core.phases import PHASES, PhaseMark, PhaseSource, SkipReason
from core.rollout_record import RolloutRecord
from core.types import RolloutStatus

Lane = Literal["client", "server", "model", "diagnostics"]
SegmentKind = Literal["admission", "phase", "skipped", "call", "idle", "terminal", "sub_phase"]

#: A moment on the record's clock, as seconds from the waterfall's origin.
At = Callable[[float], float]

#: Gaps between model calls shorter than this are not drawn (a client's own overhead).
MIN_IDLE_SEC = 0.001


@dataclass(frozen=True)
class Segment:
    """One row of the waterfall: a span (or, for `terminal` and `skipped`, a point or
    nothing) on the time axis."""

    lane: Lane
    kind: SegmentKind
    #: What the row is: "admission", a phase's name, "call #3", "idle", a status, a
    #: sub-phase's name.
    label: str
    #: Seconds from the waterfall's origin; `end` is `start` for a point, and the end of
    #: the axis (now) for a span still going on (`open`).
    start: float
    end: float
    open: bool = False
    #: Who said when a phase began: the server's event, a poll, a model call; None when it
    #: is not a phase.
    source: PhaseSource | None = None
    #: Why a phase has no span (`kind == "skipped"`).
    skipped: SkipReason | None = None
    #: A model call's: the status it was answered with (None: abandoned or still waiting),
    #: its tokens.
    status: int | None = None
    tokens: int | None = None

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Waterfall:
    """Every row of one rollout's waterfall, in drawing order, on one axis."""

    rollout_id: str
    #: The origin on the `time.monotonic()` clock of the record.
    origin: float
    #: The axis runs from 0 to `length` seconds (at least a millisecond).
    length: float
    segments: tuple[Segment, ...]
    #: Model calls the board no longer keeps (it keeps the latest `MODEL_CALLS_KEPT`).
    calls_not_kept: int = 0
    #: The backend that left the diagnostics, when there were any.
    diagnostics_backend: str | None = None


def waterfall(
    record: RolloutRecord, now: float, diagnostics: TrialDiagnostics | None = None
) -> Waterfall:
    """The waterfall of `record` as it is at `now` (a `time.monotonic()` reading: where a
    span still going on ends), with the backend's `diagnostics` when there are any."""
    admitted = record.transitions[0].at if record.transitions else None
    calls = _calls(record)
    timeline = record.timeline()
    starts = [record.submitted_at, *(mark.at for mark in timeline)]
    starts += [call.started_monotonic for call in calls]
    origin = min(starts)
    end_at = record.terminal_at
    if end_at is None:
        end_at = now if record.in_flight else max(starts)
    # Nothing of it is later than its end (a model call abandoned after it, a late report).
    ends = [end_at, *(c.ended_monotonic for c in calls if c.ended_monotonic is not None)]
    axis_end = max(ends)

    def at(moment: float) -> float:
        return moment - origin

    segments: list[Segment] = []
    if admitted is not None and admitted > record.submitted_at and record.admission_error is None:
        segments.append(
            Segment("client", "admission", "admission", at(record.submitted_at), at(admitted))
        )
    segments += _phases(record, timeline, at, at(end_at))
    segments += _model(calls, at, at(axis_end))
    if record.finished:
        terminal = "not admitted" if record.admission_error is not None else record.display_status
        segments.append(Segment("server", "terminal", terminal, at(end_at), at(end_at)))
    if diagnostics is not None:
        segments += _sub_phases(diagnostics, record, at, at(end_at))
    return Waterfall(
        rollout_id=record.rollout_id,
        origin=origin,
        length=max(at(axis_end), *(s.end for s in segments), 0.001),
        segments=tuple(segments),
        calls_not_kept=record.model.calls - len(calls),
        diagnostics_backend=None if diagnostics is None else diagnostics.backend,
    )


def _calls(record: RolloutRecord) -> list[ModelCallReport]:
    """The calls the board keeps, in the order they began."""
    activity = record.model
    kept = [*activity.recent, *activity.in_flight.values()]
    return sorted(kept, key=lambda call: (call.started_monotonic, call.call_id))


def _phases(record: RolloutRecord, timeline: list[PhaseMark], at: At, end: float) -> list[Segment]:
    """Each of queued, running and grading: its span from its mark to the next mark (the
    end of the axis while it goes on), or the reason nothing saw it."""
    skipped = record.skipped_phases()
    next_at = {a.status: b.at for a, b in pairwise(timeline)}
    rows: list[Segment] = []
    for phase in PHASES:
        mark = record.marks.get(phase)
        if phase in skipped:
            rows.append(Segment("server", "skipped", phase.value, end, end, skipped=skipped[phase]))
        elif mark is not None:
            following = next_at.get(phase)
            going_on = following is None and record.status == phase and record.in_flight
            stop = at(following) if following is not None else end
            rows.append(
                Segment(
                    "server",
                    "phase",
                    phase.value,
                    at(mark.at),
                    max(stop, at(mark.at)),
                    open=going_on,
                    source=mark.source,
                )
            )
    return rows


def _model(calls: list[ModelCallReport], at: At, end: float) -> list[Segment]:
    """Each call as a span (to the end of the axis while it waits for the model), and the
    idle gap before it when the calls before it had all ended."""
    rows: list[Segment] = []
    ended: float | None = None  # when every call so far had ended; None while one waits
    for index, call in enumerate(calls):
        start = at(call.started_monotonic)
        if ended is not None and start - ended >= MIN_IDLE_SEC:
            rows.append(Segment("model", "idle", "idle", ended, start))
        stop = None if call.ended_monotonic is None else at(call.ended_monotonic)
        rows.append(
            Segment(
                "model",
                "call",
                f"call #{call.call_id}",
                start,
                end if stop is None else max(stop, start),
                open=stop is None,
                status=call.status,
                tokens=call.total_tokens,
            )
        )
        if stop is None:
            ended = None
        elif index == 0 or ended is not None:
            ended = stop if ended is None else max(ended, stop)
    return rows


def _sub_phases(
    diagnostics: TrialDiagnostics, record: RolloutRecord, at: At, end: float
) -> list[Segment]:
    """The backend's sub-phases end to end: the verifier starting at the grading mark when
    both are known, else the last one ending at the terminal mark (the end of the axis)."""
    durations = [seconds for _name, seconds in diagnostics.phases]
    names = [name for name, _seconds in diagnostics.phases]
    grading = record.marks.get(RolloutStatus.GRADING)
    if grading is not None and "verifier" in names:
        start = at(grading.at) - sum(durations[: names.index("verifier")])
    else:
        start = end - sum(durations)
    rows: list[Segment] = []
    if diagnostics.total is not None:
        rows.append(Segment("diagnostics", "sub_phase", "trial", start, start + diagnostics.total))
    for name, seconds in diagnostics.phases:
        rows.append(Segment("diagnostics", "sub_phase", name, start, start + seconds))
        start += seconds
    return rows


__all__ = ["MIN_IDLE_SEC", "Lane", "Segment", "SegmentKind", "Waterfall", "waterfall"]
