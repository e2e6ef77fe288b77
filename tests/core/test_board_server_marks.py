"""The board merges the server's ownership events with the polls (PROTOCOL.md §8.1, issue 13).

For each rollout and status: the server's time when it reported it, else the poll's; repeats
and late reports change nothing they should not; "not observed" only when no source knows.
"""

from __future__ import annotations

from core.board import MAX_EARLY_EVENT_ROLLOUTS, RolloutBoard
from core.phases import PhaseMark
from core.reported_by import ReportedBy
from core.rollout_record import RolloutRecord
from core.types import RolloutStatus

Q, R, G = RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.GRADING
S, F, C = RolloutStatus.SUCCESS, RolloutStatus.FAILURE, RolloutStatus.CANCELLED


def server(status: RolloutStatus, at: float, sequence: int, server_id: str = "srv") -> PhaseMark:
    return PhaseMark(
        status, at, "server", server_time=1e9 + at, event_sequence=sequence, server_id=server_id
    )


def recording_board() -> tuple[RolloutBoard, list[tuple[str, PhaseMark]]]:
    seen: list[tuple[str, PhaseMark]] = []

    def hook(record: RolloutRecord, mark: PhaseMark) -> None:
        seen.append((record.rollout_id, mark))

    return RolloutBoard(on_transition=hook), seen


def test_a_phase_only_the_server_reported_is_current_and_timed_by_the_server() -> None:
    board, seen = recording_board()
    record = board.observe("r", Q, 10.0, row_index=0, run_index=0, grade=True)
    board.server_mark("r", server(Q, 9.9, 1))
    board.server_mark("r", server(R, 10.5, 2))
    # The poll still says queued (an official server holds it until the next change).
    assert record.observed.status is Q
    assert record.status is R and record.display_status == "running"
    assert record.phase_started_at == 10.5
    assert board.counts()["running"] == 1 and board.counts()["queued"] == 0
    assert [(m.status, m.source) for _, m in seen] == [(Q, "poll"), (Q, "server"), (R, "server")]
    queued = record.marks[Q]
    assert (queued.source, queued.at, queued.polled_at) == ("server", 9.9, 10.0)


def test_the_terminal_status_comes_from_the_poll_with_its_result() -> None:
    board, _ = recording_board()
    record = board.observe("r", Q, 1.0, grade=True)
    for sequence, (status, at) in enumerate(((Q, 0.9), (R, 1.1), (G, 2.0), (S, 2.5))):
        board.server_mark("r", server(status, at, sequence))
    # The server's success alone finishes nothing: the result comes with the poll.
    assert record.status is G and not record.finished
    board.observe("r", S, 2.7)
    assert record.status is S and record.finished
    assert record.terminal_at == 2.5  # the server's time
    assert record.skipped_phases() == {}
    assert [m.status for m in record.timeline()] == [Q, R, G, S]


def test_not_observed_only_when_no_source_knows() -> None:
    board, _ = recording_board()
    record = board.observe("r", Q, 1.0, grade=True)
    board.server_mark("r", server(R, 1.2, 5))
    board.observe("r", S, 3.0)
    assert record.skipped_phases() == {G: "not_observed"}


def test_repeated_and_late_reports_change_nothing_they_should_not() -> None:
    board, seen = recording_board()
    record = board.observe("r", Q, 1.0, grade=True)
    board.observe("r", R, 2.0)
    board.server_mark("r", server(R, 1.5, 2))
    board.server_mark("r", server(R, 1.5, 2))  # the exporter's retry
    board.server_mark("r", server(R, 1.7, 9))  # the same status again, later
    assert record.marks[R].at == 1.5 and record.marks[R].polled_at == 2.0
    assert sum(1 for _, m in seen if m.source == "server") == 1
    # A late `queued` after the rollout moved on leaves the status where it is.
    board.server_mark("r", server(Q, 0.9, 1))
    assert record.status is R and record.marks[Q].at == 0.9


def test_a_restarted_server_numbers_its_events_again_and_is_still_heard() -> None:
    board, _ = recording_board()
    first = board.observe("a", Q, 1.0, grade=True)
    board.server_mark("a", server(R, 1.1, 40))
    # The server process restarted: its sequence starts over; a new rollout is reported.
    second = board.observe("b", Q, 5.0, grade=True)
    board.server_mark("b", server(Q, 4.9, 0))
    board.server_mark("b", server(R, 5.1, 1))
    assert first.status is R and second.status is R
    assert second.marks[R].event_sequence == 1


def test_events_that_beat_the_admission_answer_wait_for_the_rollout() -> None:
    board, _ = recording_board()
    board.server_mark("r", server(Q, 0.5, 0))
    board.server_mark("r", server(R, 0.6, 1))
    record = board.observe("r", Q, 1.0, grade=True)
    assert record.status is R and record.marks[Q].source == "server"
    # Ids never put on the board are kept for a bounded number of rollouts only.
    for index in range(MAX_EARLY_EVENT_ROLLOUTS + 10):
        board.server_mark(f"other-{index}", server(Q, 1.0, index))
    assert len(board._early_events) == MAX_EARLY_EVENT_ROLLOUTS


def test_a_flood_of_events_for_one_unknown_id_is_kept_as_one_per_status() -> None:
    """Issue 30 §4: 1,200,000 events for one ghost id from one local sender took +232 MiB.
    A repeat of a status is no news: the first of each is kept, and it is what the rollout
    gets should it come."""
    board, seen = recording_board()
    for sequence in range(200_000):
        board.server_mark("ghost", server((Q, R)[sequence % 2], 1.0 + sequence, sequence))
    assert [mark.event_sequence for mark in board._early_events["ghost"].values()] == [0, 1]
    record = board.observe("ghost", Q, 1.5, grade=True)
    assert (record.marks[Q].at, record.marks[R].at) == (1.0, 2.0)
    assert [(m.status, m.source) for _, m in seen] == [(Q, "poll"), (Q, "server"), (R, "server")]


def test_durations_and_stuck_read_the_servers_times() -> None:
    board = RolloutBoard(stuck_after_sec=5.0)
    record = board.observe("r", Q, 0.0, grade=True)
    board.server_mark("r", server(R, 1.0, 1))
    assert board.stuck_ids(now=5.5) == []
    assert board.stuck_ids(now=6.5) == ["r"]  # running since the server's 1.0, not 0.0
    board.server_mark("r", server(G, 8.0, 2))
    assert board.stuck_ids(now=8.5) == []
    queued, running = board._durations[Q], board._durations[R]
    assert (len(queued), queued.median()) == (1, 1.0)
    assert (len(running), running.median()) == (1, 7.0)
    board.observe("r", S, 9.0)
    assert record.finished and board.stuck_ids(now=100.0) == []


def test_an_untracked_rollout_still_gets_its_servers_reports() -> None:
    board, _ = recording_board()
    record = board.observe("r", Q, 0.0, grade=True)
    board.stop_tracking(["r"])
    board.server_mark("r", server(R, 1.0, 1))
    assert record.marks[R].source == "server" and board.stuck_ids(now=1e6) == []


def test_a_cancel_that_failed_leaves_the_rollout_as_it_was() -> None:
    from core.rollout_record import CancelRequest

    board, _ = recording_board()
    record = board.observe("r", Q, 0.0, grade=True)
    record.cancels += (CancelRequest(requested_at=1.0),)
    assert record.cancelling
    record.cancels[-1].error = "ConnectError: the server is gone"
    assert not record.cancelling


def test_a_rollout_is_one_servers_reports_from_another_server_id_are_refused() -> None:
    """Issue 30 §13: any local process can post events; once a rollout's server reported it,
    a cancel (or any status) from another `server_id` changes nothing and is not recorded,
    also when it was waiting for the rollout to be added."""
    board, seen = recording_board()
    board.server_mark("early", server(Q, 0.5, 0, "srv"))
    board.server_mark("early", server(C, 0.6, 1, "forger"))
    early = board.observe("early", Q, 1.0, grade=True)
    record = board.observe("r", Q, 1.0, grade=True)
    board.server_mark("r", server(R, 1.5, 2, "srv"))
    board.server_mark("r", server(C, 1.6, 3, "forger"))
    board.server_mark("r", server(G, 1.7, 4, "forger"))
    assert record.status is R and set(record.marks) == {Q, R}
    assert early.status is Q and set(early.marks) == {Q}
    assert {m.server_id for _, m in seen if m.source == "server"} == {"srv"}
    board.server_mark("r", server(G, 1.8, 5, "srv"))
    assert record.status is G


def test_a_rollout_nobody_here_sent_is_known_by_its_servers_reports_alone() -> None:
    # `osmosis-tui watch`: the first report puts it on the board; its terminal status is the
    # server's word (no poll, no result); another server's report of the same id is refused.
    board, seen = recording_board()
    owner = ReportedBy("srv", namespace="team", run_id="r-1", run_name="nightly")
    record = board.server_report("w", server(Q, 5.0, 1), owner)
    assert record.reported_by == owner and record.server == "srv"
    assert (record.status, record.submitted_at, record.row_index) == (Q, 5.0, None)
    board.server_report("w", server(R, 6.0, 2), owner)
    board.server_report("w", server(R, 6.5, 3), owner)  # a repeat: no news
    board.server_report("w", server(F, 7.0, 9, server_id="intruder"), owner)
    assert record.status is R and record.phase_started_at == 6.0
    assert board.is_stuck(record, now=6.0 + 31.0)  # from the server's own time
    board.server_report("w", server(G, 8.0, 4), owner)
    board.server_report("w", server(S, 9.0, 5), owner)
    assert record.status is S and record.finished and record.terminal_at == 9.0
    assert record.latest_result is None and record.skipped_phases() == {}
    assert [m.status for _, m in seen] == [Q, R, G, S]
    counts = board.counts(now=100.0)
    assert (counts["success"], counts["stuck"], counts["total"]) == (1, 0, 1)
    assert record.matches("NIGHTLY") and record.matches("team") and not record.matches("other")


def test_a_watched_rollout_first_seen_running_says_its_queue_went_unseen() -> None:
    board, _ = recording_board()
    record = board.server_report("w", server(R, 3.0, 7), ReportedBy("srv"))
    board.server_report("w", server(C, 4.0, 8), ReportedBy("srv"))
    assert record.status is C and not board.failures_by_category()
    failed = board.server_report("f", server(F, 5.0, 9), ReportedBy("srv"))
    assert failed.status is F and board.failures_by_category() == {"category unknown": 1}
    # The watch began after it was queued: no time is made up for it, it is said unseen.
    assert record.skipped_phases() == {Q: "not_observed", G: "ended_early"}
    assert Q not in record.marks
