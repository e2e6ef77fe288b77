"""`BoardTimeline`: a live run's time line, kept up with its board.

The board tells which rollouts changed (a `ChangeFeed` of the timeline's own, so the table's
batches are untouched); each changed record says when it began (its first status, the
admission's answer, as the run's transitions.jsonl records it), when it ended and how, its
cancels (a requeue's is its time), when it was untracked and whether it was sent by hand;
a stuck flag is placed where the board's threshold was crossed. What the board keeps no
time for is taken at the update that first sees it, a repaint's moment (a third of a second
at most): a pause, resume or new max-in-flight, a server that went down, began draining or
restarted. Times are seconds since the board's start.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from core.board import ChangeFeed, RolloutBoard
from core.eval.dispatch_gate import DispatchState
from core.eval.timeline.model import (
    DRAINED,
    NOT_ADMITTED,
    UNTRACKED,
    Marker,
    MarkerKind,
    RunTimeline,
)
from core.eval.timeline.recorded import TOO_MANY_REQUESTS
from core.rollout_record import RolloutRecord


@dataclass(frozen=True)
class ServerSeen:
    """A server as the run sees it now: its lane (its URL), its state, its restarts."""

    lane: str
    state: str
    restarts: int = 0


class BoardTimeline:
    """Follows `board` into `timeline` at each `update`; `close` stops following."""

    def __init__(self, board: RolloutBoard) -> None:
        self.board = board
        self.timeline = RunTimeline()
        # Made by the first update that follows the records (which follows every record the
        # board holds then): a feed nobody takes from keeps every rollout id of the run.
        self._feed: ChangeFeed | None = None
        self._cancels: dict[str, int] = {}
        self._requeued: set[str] = set()
        self._calls_seen: set[tuple[str, int]] = set()
        self._stuck: set[str] = set()
        self._dispatch: DispatchState | None = None
        self._restarts: dict[str, int] = {}
        self._states: dict[str, str] = {}
        self._now = 0.0

    def close(self) -> None:
        if self._feed is not None:
            self.board.unsubscribe(self._feed)
            self._feed = None

    def _t(self, at: float) -> float:
        return at - self.board.started_at

    def update(
        self,
        now: float,
        *,
        dispatch: DispatchState | None = None,
        servers: Iterable[ServerSeen] = (),
        records: bool = True,
    ) -> RunTimeline:
        """Bring the time line up to `now` (the board's clock): the dispatch and the servers
        as they are, the rollouts stuck now, and, with `records`, the records changed since
        they were last followed (all of them the first time).

        The records keep their own times, so following them can wait until the time line is
        looked at; what only an update sees (the rest) cannot, and is cheap."""
        self._now = self._t(now)
        if records:
            self._follow_changed()
        self._steered(dispatch)
        for server in servers:
            self._server(server)
        board = self.board
        stuck = set(board.stuck_ids(now))
        for rollout_id in stuck - self._stuck:
            record = board.records[rollout_id]
            # Where it crossed its phase's threshold (the board's rule), not when seen.
            crossed = record.phase_started_at + board.stuck_threshold(record.status)
            at = min(self._t(crossed), self._now)
            self.timeline.mark(Marker(at, MarkerKind.STUCK, "flagged stuck", rollout_id))
        self._stuck = stuck
        self.timeline.extend(self._now)
        return self.timeline

    def _follow_changed(self) -> None:
        board, records = self.board, self.board.records
        changed: Iterable[str]
        if self._feed is None:  # the first time: everything the board holds, with its time
            self._feed = board.subscribe()
            changed = list(records)
        else:
            batch = self._feed.take()
            changed = (*batch.added, *batch.ids)
        for rollout_id in changed:
            record = records.get(rollout_id)
            if record is not None:
                self._follow(record)

    def _follow(self, record: RolloutRecord) -> None:
        timeline, rollout_id = self.timeline, record.rollout_id
        if record.admission_error is not None:
            if rollout_id not in timeline.spans:
                at = self._t(record.submitted_at)
                timeline.began(rollout_id, at, record.server)
                timeline.ended(rollout_id, at, NOT_ADMITTED)
                timeline.refused(at, record.server)
            return
        # A watch's rollout has no poll: its server's first report began it (`submitted_at`).
        watched = record.reported_by is not None
        if not record.transitions and not watched:
            return
        if rollout_id not in timeline.spans:
            start = self._t(record.transitions[0].at if not watched else record.submitted_at)
            timeline.began(rollout_id, start, record.server)
            if record.manual:
                timeline.mark(Marker(start, MarkerKind.MANUAL, "sent by hand", rollout_id))
        for cancel in record.cancels[self._cancels.get(rollout_id, 0) :]:
            at = self._t(cancel.requested_at)
            timeline.mark(Marker(at, MarkerKind.CANCEL, "cancel asked", rollout_id))
        self._cancels[rollout_id] = len(record.cancels)
        if record.requeued_as is not None and rollout_id not in self._requeued:
            self._requeued.add(rollout_id)
            text = f"requeued as {record.requeued_as}"
            # A requeue cancels the rollout at once: its cancel's time is the requeue's.
            at = self._t(record.cancels[-1].requested_at) if record.cancels else self._now
            timeline.mark(Marker(at, MarkerKind.REQUEUE, text, rollout_id))
        for call in record.model.recent:
            key = (rollout_id, call.call_id)
            ended = call.ended_monotonic
            refused = call.status == TOO_MANY_REQUESTS and ended is not None
            if refused and ended is not None and key not in self._calls_seen:
                self._calls_seen.add(key)
                timeline.refused(self._t(ended), record.server)
        span = timeline.spans[rollout_id]
        if span.end is not None:
            return
        if record.finished:
            # A terminal status is always the last one the polls observed (a watch's: the
            # server reported it).
            ended_at = record.terminal_at if watched else record.transitions[-1].at
            assert ended_at is not None  # finished
            timeline.ended(rollout_id, self._t(ended_at), record.status.value)
        elif record.untracked:
            untracked_at = record.untracked_at
            # Never later than the update that sees it.
            at = self._now if untracked_at is None else min(self._t(untracked_at), self._now)
            timeline.ended(rollout_id, at, UNTRACKED)
            timeline.mark(Marker(at, MarkerKind.UNTRACK, "untracked", rollout_id))

    def _steered(self, dispatch: DispatchState | None) -> None:
        before, self._dispatch = self._dispatch, dispatch
        if dispatch is None:
            return
        timeline, now = self.timeline, self._now
        if dispatch.max_in_flight is not None and (
            before is None or before.max_in_flight != dispatch.max_in_flight
        ):
            timeline.limit(now, dispatch.max_in_flight)
            if before is not None and before.max_in_flight is not None:
                timeline.mark(
                    Marker(now, MarkerKind.LIMIT, f"max in flight {dispatch.max_in_flight}")
                )
        if before is not None and before.paused != dispatch.paused:
            kind = MarkerKind.PAUSE if dispatch.paused else MarkerKind.RESUME
            word = "paused" if dispatch.paused else "resumed"
            timeline.mark(Marker(now, kind, f"dispatch {word}"))
        elif before is None and dispatch.paused:
            timeline.mark(Marker(now, MarkerKind.PAUSE, "dispatch paused"))

    def _server(self, server: ServerSeen) -> None:
        timeline, now = self.timeline, self._now
        timeline.server_state(server.lane, now, server.state)
        before = self._states.get(server.lane)
        if before is not None and DRAINED in (before, server.state) and before != server.state:
            word = "drained" if server.state == DRAINED else "undrained"
            timeline.mark(Marker(now, MarkerKind.DRAIN, f"{server.lane} {word}"))
        self._states[server.lane] = server.state
        restarts = self._restarts.get(server.lane, server.restarts)
        if server.restarts > restarts:
            timeline.mark(Marker(now, MarkerKind.RESTART, f"{server.lane} restarted"))
        self._restarts[server.lane] = server.restarts
