"""The time line of a recorded run: its events (`core.eval.results.recording`, or an official
run folder's from `core.eval.results.official_timeline`) onto a `RunTimeline`.

A rollout is in flight exactly when a replay's board says so: from its first status a poll
saw (a server's report of a rollout not on the board yet begins nothing), until a terminal
status a poll saw (a server's terminal report ends nothing: the result comes with the
poll's), its untrack, or the end of its invocation, whichever comes first. A rollout its
server never admitted is never in flight; it is a refusal on the time line. Its lane is the
`server_id` of the first server that reported it ("" when none did).
"""

from __future__ import annotations

from collections.abc import Iterable

from core.eval.results.recording import (
    CancelAnswered,
    CancelAsked,
    DispatchStarted,
    DispatchSteered,
    ModelCallSeen,
    NotAdmitted,
    ReplayEvent,
    Requeued,
    SentByHand,
    SessionEnded,
    SessionStarted,
    StatusSeen,
    Untracked,
)
from core.eval.timeline.model import NOT_ADMITTED, UNTRACKED, Marker, MarkerKind, RunTimeline

#: The status a model call answered when its upstream refused it for its rate.
TOO_MANY_REQUESTS = 429


def timeline_of_recording(events: Iterable[ReplayEvent], origin: float = 0.0) -> RunTimeline:
    """The time line of `events` (in play order), in seconds since `origin` (the time of the
    recording's first event, so that it agrees with the replay's seek)."""
    timeline = RunTimeline()
    lanes: dict[str, str] = {}
    asked: set[tuple[str, float]] = set()
    for event in events:
        t = event.t - origin
        if isinstance(event, StatusSeen):
            _status(timeline, event, t, lanes)
        elif isinstance(event, NotAdmitted):
            if event.rollout_id not in timeline.spans:
                timeline.began(event.rollout_id, t)
                timeline.ended(event.rollout_id, t, NOT_ADMITTED)
                timeline.refused(t, "")
        elif isinstance(event, Untracked):
            if _open(timeline, event.rollout_id):
                timeline.ended(event.rollout_id, t, UNTRACKED)
                timeline.mark(Marker(t, MarkerKind.UNTRACK, "untracked", event.rollout_id))
        elif isinstance(event, SessionEnded):
            left = [rid for rid in timeline.spans if _open(timeline, rid)]
            for rollout_id in left:
                timeline.ended(rollout_id, t, UNTRACKED)
            timeline.mark(
                Marker(t, MarkerKind.SESSION, f"invocation {event.number} ended, {len(left)} left")
            )
        elif isinstance(event, (CancelAsked, CancelAnswered)):
            # A line of an older version has only the answer: the cancel was asked for then.
            key = (event.rollout_id, event.t if isinstance(event, CancelAsked) else event.asked_t)
            if key not in asked:
                asked.add(key)
                timeline.mark(Marker(key[1] - origin, MarkerKind.CANCEL, "cancel asked", key[0]))
        elif isinstance(event, ModelCallSeen):
            if event.ended and event.call.status == TOO_MANY_REQUESTS:
                timeline.refused(t, lanes.get(event.call.rollout_id, ""))
        else:
            _run_event(timeline, event, t)
        timeline.extend(t)
    return timeline


def _open(timeline: RunTimeline, rollout_id: str) -> bool:
    span = timeline.spans.get(rollout_id)
    return span is not None and span.end is None


def _status(timeline: RunTimeline, event: StatusSeen, t: float, lanes: dict[str, str]) -> None:
    rollout_id = event.rollout_id
    if event.server is not None:
        lane = lanes.setdefault(rollout_id, event.server.server_id or "")
        timeline.assign_lane(rollout_id, lane)
        if event.reported_by is None:
            return
        # A watch's rollout: its server's lines are all there is of it, its end among them.
    timeline.began(rollout_id, t, lanes.get(rollout_id, ""))
    if event.status.is_terminal:
        timeline.ended(rollout_id, t, event.status.value)


def _run_event(timeline: RunTimeline, event: ReplayEvent, t: float) -> None:
    """What was done to the run: a marker (and the limit, when it was set)."""
    if isinstance(event, DispatchStarted):
        timeline.limit(t, event.max_in_flight)
    elif isinstance(event, DispatchSteered):
        if event.action == "max_in_flight" and event.value is not None:
            timeline.limit(t, event.value)
            timeline.mark(Marker(t, MarkerKind.LIMIT, f"max in flight {event.value}"))
        elif event.action in ("pause", "resume"):
            kind = MarkerKind.PAUSE if event.action == "pause" else MarkerKind.RESUME
            timeline.mark(Marker(t, kind, f"dispatch {event.action}d"))
        elif event.action in ("drain", "undrain"):
            timeline.mark(Marker(t, MarkerKind.DRAIN, f"{event.server} {event.action}ed"))
    elif isinstance(event, Requeued):
        # A hedge leaves its first attempt running; a rule's requeue is a requeue all the same.
        said = {"hedge": "hedged by", "rule": "requeued by --requeue-stuck as"}
        text = f"{said.get(event.reason or '', 'requeued as')} {event.new_rollout_id}"
        timeline.mark(Marker(t, MarkerKind.REQUEUE, text, event.rollout_id))
    elif isinstance(event, SentByHand):
        text = f"re-run of {event.rerun_of}" if event.rerun_of else "sent by hand"
        timeline.mark(Marker(t, MarkerKind.MANUAL, text, event.rollout_id))
    elif isinstance(event, SessionStarted) and event.number > 1:
        timeline.mark(Marker(t, MarkerKind.SESSION, f"invocation {event.number} began"))
