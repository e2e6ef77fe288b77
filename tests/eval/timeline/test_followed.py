"""A live run's time line, followed from its board: spans from each rollout's first status to
its end, untrack and cancel times as the board has them, and what the board has no time
for (the limit, a pause, a server's state, a stuck flag) at the update that sees it."""

from __future__ import annotations

from core.board import RolloutBoard
from core.eval.dispatch_gate import DispatchState
from core.eval.timeline.followed import BoardTimeline, ServerSeen
from core.eval.timeline.model import MarkerKind
from core.rollout_record import CancelRequest
from core.types import RolloutStatus

T0 = 1_000.0
Q, R, OK = RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.SUCCESS
A, B, C, D = ("a" * 32, "b" * 32, "c" * 32, "d" * 32)


def board() -> RolloutBoard:
    made = RolloutBoard(stuck_after_sec=30.0)
    made.started_at = T0
    return made


def test_spans_begin_at_the_first_status_and_end_as_the_board_says() -> None:
    run = board()
    run.observe(A, Q, T0 + 1.0)
    follower = BoardTimeline(run)  # what the board held before is followed too
    follower.update(T0 + 2.0)
    run.observe(B, Q, T0 + 3.0)
    run.observe(A, R, T0 + 4.0)
    run.observe(A, OK, T0 + 6.0)
    run.stop_tracking([B], at=T0 + 7.0)
    timeline = follower.update(T0 + 8.0)
    assert timeline.in_flight_at(2.0) == [A]
    assert timeline.in_flight_at(5.0) == [A, B]
    assert timeline.in_flight_at(6.0) == [B]  # a's end: no longer in flight
    assert timeline.in_flight_at(7.0) == []
    assert [(m.t, m.kind, m.rollout_id) for m in timeline.markers] == [(7.0, MarkerKind.UNTRACK, B)]
    assert timeline.end == 8.0
    follower.close()
    assert run._feeds == []  # its feed is gone (the board's own is made by take_changes)


def test_a_time_line_not_looked_at_holds_no_feed_and_catches_up_when_it_is() -> None:
    """The dashboard updates the follower at every repaint, the records only while the time
    line is open: until then the board feeds it nothing (a feed nobody takes from would keep
    every rollout id of the run)."""
    run = board()
    follower = BoardTimeline(run)
    run.observe(A, Q, T0 + 1.0)
    run.observe(A, OK, T0 + 2.0)
    for second in (3.0, 4.0):
        follower.update(T0 + second, records=False)
    run.observe(B, Q, T0 + 4.5)
    assert run._feeds == [] and follower.timeline.spans == {}
    timeline = follower.update(T0 + 5.0)  # opened: everything so far, with its times
    assert timeline.in_flight_at(1.5) == [A] and timeline.in_flight_at(5.0) == [B]
    assert len(run._feeds) == 1
    run.observe(B, OK, T0 + 6.0)
    assert follower.update(T0 + 7.0).in_flight_at(6.5) == []
    follower.close()
    assert run._feeds == []


def test_cancels_not_admitted_and_sent_by_hand() -> None:
    run = board()
    follower = BoardTimeline(run)
    run.observe(A, Q, T0 + 1.0)
    run.observe_cancel(A, CancelRequest(T0 + 2.5))
    manual = run.observe(C, Q, T0 + 3.0)
    manual.manual = True
    run.record_not_admitted(D, "503", server="http://s", submitted_at=T0 + 4.0)
    timeline = follower.update(T0 + 5.0)
    seen = sorted((m.t, m.kind, m.rollout_id) for m in timeline.markers)
    assert seen == [(2.5, MarkerKind.CANCEL, A), (3.0, MarkerKind.MANUAL, C)]
    assert timeline.refusals == [(4.0, "http://s")]
    assert D not in timeline.in_flight_at(4.0)
    run.observe_cancel(A, run.records[A].cancels[0])  # the answer: no second marker
    assert len(follower.update(T0 + 6.0).markers) == 2


def test_the_limit_pauses_and_servers_at_the_update_that_sees_them_stuck_where_crossed() -> None:
    run = board()
    follower = BoardTimeline(run)
    run.observe(A, Q, T0 + 1.0)
    follower.update(T0 + 2.0, dispatch=DispatchState(paused=False, max_in_flight=4))
    follower.update(
        T0 + 10.0,
        dispatch=DispatchState(paused=True, max_in_flight=2),
        servers=[ServerSeen("http://s", "down", restarts=0)],
    )
    timeline = follower.update(
        T0 + 40.0,
        dispatch=DispatchState(paused=False, max_in_flight=2),
        servers=[ServerSeen("http://s", "accepting", restarts=1)],
    )
    assert timeline.limits == [(2.0, 4), (10.0, 2)]
    assert timeline.limit_at(9.0) == 4 and timeline.limit_at(10.0) == 2
    kinds = [(m.t, m.kind) for m in timeline.markers]
    assert kinds == [
        (10.0, MarkerKind.LIMIT),
        (10.0, MarkerKind.PAUSE),
        (40.0, MarkerKind.RESUME),
        (40.0, MarkerKind.RESTART),
        (31.0, MarkerKind.STUCK),  # queued since 1 s: 30 s later, seen at 40 s
    ]
    (down,) = timeline.server_spans
    assert (down.state, down.start, down.end) == ("down", 10.0, 40.0)


def test_records_are_followed_when_asked_for_with_their_own_times() -> None:
    """Closed, the dashboard's timeline follows only what has no time of its own; opened, it
    catches up on the records, each at its own times (a requeue at its cancel's)."""
    run = board()
    follower = BoardTimeline(run)
    record = run.observe(A, Q, T0 + 1.0)
    run.observe_cancel(A, CancelRequest(T0 + 3.0))
    record.requeued_as = B
    run.observe(A, RolloutStatus.CANCELLED, T0 + 4.0)
    assert not follower.update(T0 + 9.0, records=False).spans
    timeline = follower.update(T0 + 10.0)
    assert timeline.in_flight_at(2.0) == [A] and timeline.in_flight_at(4.0) == []
    assert sorted((m.t, m.kind) for m in timeline.markers) == [
        (3.0, MarkerKind.CANCEL),
        (3.0, MarkerKind.REQUEUE),
    ]
