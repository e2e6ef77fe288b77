"""RolloutBoard's change batches for more than one consumer (the run's own front end and the
dashboards attached to it), its untrack hook, and `touch`."""

from __future__ import annotations

from core import RolloutStatus
from core.board import RolloutBoard
from core.rollout_record import CancelRequest, RolloutRecord

Q, R, S = RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.SUCCESS


def test_each_feed_gets_every_change_whatever_the_others_take() -> None:
    board = RolloutBoard()
    board.observe("before", Q, 1.0)
    viewer = board.subscribe()
    board.observe("a", Q, 2.0)
    own = board.take_changes()
    assert own.ids == {"before", "a"} and own.added == ("before", "a")
    board.observe("a", R, 3.0)
    first = viewer.take()
    # Subscribed after "before" was added: only what happened since.
    assert first.ids == {"a"} and first.added == ("a",)
    assert board.take_changes().ids == {"a"}
    assert viewer.take().ids == set()
    board.observe("before", S, 4.0)
    other = board.subscribe()
    board.observe("b", Q, 5.0)
    assert viewer.take().ids == {"before", "b"}
    assert other.take().ids == {"b"}
    assert board.take_changes().ids == {"before", "b"}


def test_each_feed_numbers_its_own_batches() -> None:
    board = RolloutBoard()
    viewer = board.subscribe()
    assert [board.take_changes().version for _ in range(3)] == [1, 2, 3]
    assert viewer.take().version == 1


def test_an_unsubscribed_feed_is_fed_no_more() -> None:
    board = RolloutBoard()
    viewer = board.subscribe()
    board.unsubscribe(viewer)
    board.unsubscribe(viewer)  # twice: nothing happens
    board.observe("a", Q, 1.0)
    assert viewer.take().ids == set()
    assert board.take_changes().ids == {"a"}


def test_the_untrack_hook_hears_of_each_rollout_once() -> None:
    untracked: list[str] = []

    def heard(record: RolloutRecord) -> None:
        untracked.append(record.rollout_id)

    board = RolloutBoard(on_untrack=heard)
    board.observe("a", R, 1.0)
    board.observe("done", S, 1.0)
    assert board.stop_tracking(["a", "done", "unknown"]) == ["a"]
    assert board.stop_tracking(["a"]) == []
    assert untracked == ["a"]
    assert board.counts()["untracked"] == 1


def test_touch_puts_a_record_changed_from_outside_in_every_feed() -> None:
    board = RolloutBoard()
    record = board.observe("a", R, 1.0)
    viewer = board.subscribe()
    board.take_changes()
    record.cancels += (CancelRequest(requested_at=2.0, disposition="cancelled_running"),)
    board.touch("a")
    board.touch("unknown")  # not on the board: nothing to tell
    assert board.take_changes().ids == {"a"}
    assert viewer.take().ids == {"a"}
