"""RolloutBoard: what it records of each rollout, and what it lets a front end do (issue 3)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from core import RolloutClient, RolloutStatus
from core.board import RolloutBoard
from core.eval.results.calls import ModelCall
from core.model_activity import MODEL_CALLS_KEPT, ModelActivity
from core.packed_transitions import PackedTransitions
from core.rollout_record import CancelRequest, RequestOptions, RolloutRecord
from core.spill_file import SpillFile
from tests.conftest import Serve
from tests.core.test_client import CHAT_URL, PROMPT, FaultyTransport, real_server
from tests.polling import eventually

Q, R, G = RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.GRADING
S, F, C = RolloutStatus.SUCCESS, RolloutStatus.FAILURE, RolloutStatus.CANCELLED


def statuses(record: RolloutRecord) -> list[RolloutStatus]:
    return [transition.status for transition in record.transitions]


async def track(
    board: RolloutBoard, client: RolloutClient, rollout_id: str, **request: Any
) -> RolloutRecord:
    handle = await client.run_rollout_async(
        PROMPT, CHAT_URL, rollout_id, **request, on_change=board.handle_changed
    )
    options = RequestOptions(
        initial_messages=tuple(PROMPT),
        chat_completions_url=CHAT_URL,
        label=request.get("label"),
        metadata=request.get("metadata"),
        grade=request.get("grade", True),
    )
    return board.track(handle, client=client, options=options, row_index=0, run_index=0)


async def settle(record: RolloutRecord) -> None:
    """Until the rollout's polling has ended (a finished record has let its handle go)."""
    await eventually(lambda: record.finished or record.untracked, f"{record.rollout_id} to end")


def test_a_rollout_seen_queued_then_success_skipped_two_phases_unobserved() -> None:
    board = RolloutBoard()
    board.observe("fast", Q, 1.0, row_index=3, run_index=1, grade=True)
    record = board.observe("fast", S, 1.2)
    assert statuses(record) == [Q, S]
    assert record.skipped_phases() == {R: "not_observed", G: "not_observed"}
    assert record.terminal_at == 1.2
    assert record.finished and not record.in_flight


@pytest.mark.parametrize("spilled", [False, True], ids=["in-memory", "spilled"])
async def test_observed_phases_of_a_graded_success(
    serve: Serve, tmp_path: Path, spilled: bool
) -> None:
    board = RolloutBoard()
    if spilled:
        board.spill = SpillFile(tmp_path)
    async with real_server(serve) as srv, srv.client() as client:
        record = await track(
            board, client, "graded", label="42", metadata={"sleep": 0.3, "grade_sleep": 0.3}
        )
        handle = record.handle
        assert handle is not None
        await settle(record)
    # Its polling over, the record keeps the result packed (in the spill file when the board
    # has one, which leaves no name behind): it reads back as it was received, to the fields
    # the server set, and its head has what the rows read.
    assert not any(tmp_path.iterdir())  # noqa: ASYNC240 (a test's tmp folder)
    assert record.handle is None and handle.latest_result is not None
    assert record.latest_result == handle.latest_result
    assert record.latest_result.model_fields_set == handle.latest_result.model_fields_set
    sample, received = record.latest_result.sample, handle.latest_result.sample
    assert sample is not None and received is not None
    assert sample.model_fields_set == received.model_fields_set
    assert sample.messages and sample.trajectory_messages is None
    head = record.result_head
    assert head is not None and (head.status, head.reward, head.label) == (S, 1.0, "42")
    # With the observed-status header, every phase that lasted a poll is seen.
    assert statuses(record) == [Q, R, G, S]
    assert record.skipped_phases() == {}
    assert record.latest_result is not None and record.latest_result.sample is not None
    assert record.latest_result.sample.reward == 1.0
    assert record.polls >= 3 and record.poll_error is None
    # What was asked reads back as it was sent (kept in the spill file with the rest), and
    # its label is at hand for the filter without reading it back.
    assert record.asked and record.label == "42" and record.matches("42")
    assert record.options == RequestOptions(
        initial_messages=tuple(PROMPT),
        chat_completions_url=CHAT_URL,
        label="42",
        metadata={"sleep": 0.3, "grade_sleep": 0.3},
    )
    assert (record.request is None) is spilled


async def test_grade_false_skips_grading_as_not_requested(serve: Serve) -> None:
    board = RolloutBoard()
    async with real_server(serve) as srv, srv.client() as client:
        record = await track(board, client, "ungraded", metadata={"sleep": 0.2}, grade=False)
        await settle(record)
    assert statuses(record)[-1] is S
    assert G not in statuses(record)
    assert record.skipped_phases()[G] == "not_requested"


async def test_a_failure_while_running_ended_before_grading(serve: Serve) -> None:
    board = RolloutBoard()
    async with real_server(serve) as srv, srv.client() as client:
        record = await track(
            board, client, "broken", label="42", metadata={"sleep": 0.2, "raise": "runtime"}
        )
        await settle(record)
    assert statuses(record) == [Q, R, F]
    assert record.skipped_phases() == {G: "ended_early"}
    assert record.latest_result is not None
    assert record.latest_result.err_category is not None
    assert record.latest_result.err_category.value == "agent_error"


async def test_a_record_reads_its_handle_and_masks_what_it_shows(serve: Serve) -> None:
    board = RolloutBoard(redact=lambda text: text.replace("sk-secret", "***"))
    async with real_server(serve) as srv, srv.client() as client:
        record = await track(
            board,
            client,
            "reads",
            label="42",
            metadata={"sleep": 0.2, "raise": "runtime", "message": "key sk-secret refused"},
        )
        handle = record.handle
        assert handle is not None
        await settle(record)
    # One owner per fact: the record's observations are its handle's, kept (its transitions
    # packed) once the handle is let go, not a copy made while it polled.
    assert record.transitions == handle.transitions
    assert isinstance(record.transitions, PackedTransitions)
    assert record.status is handle.status is F
    assert (record.polls, record.poll_retries) == (handle.polls, handle.poll_retries)
    assert record.grade is handle.grade is True
    assert record.skipped_phases() == handle.skipped_phases() == {G: "ended_early"}
    assert record.terminal_at == handle.transitions[-1].at
    raw, shown = handle.latest_result, record.latest_result
    assert raw is not None and raw.err_message is not None and "sk-secret" in raw.err_message
    assert shown is not None and shown.err_message is not None
    assert "sk-secret" not in shown.err_message and "***" in shown.err_message
    head = record.result_head
    assert head is not None and head.err_message == shown.err_message
    assert record.result_head is head  # masked once, not on every repaint of its row
    assert board.counts()["failure"] == 1 and board.failures_by_category() == {"agent_error": 1}


async def test_the_board_tracks_only_handles_that_report_to_it(serve: Serve) -> None:
    board = RolloutBoard()
    async with real_server(serve) as srv, srv.client() as client:
        handle = await client.run_rollout_async(PROMPT, CHAT_URL, "stray", label="42")
        with pytest.raises(ValueError, match=r"on_change=board\.handle_changed"):
            board.track(handle)
        with pytest.raises(AttributeError):  # hooks are given at construction, once
            handle.on_change = board.handle_changed  # type: ignore[misc]
        await handle
    assert len(board) == 0


async def test_cancel_on_server_records_the_request_the_answer_and_the_end(serve: Serve) -> None:
    board = RolloutBoard()
    async with real_server(serve) as srv, srv.client() as client:
        record = await track(board, client, "stopme", label="42", metadata={"sleep": 30})
        assert record.handle is not None
        await record.handle.wait_for_running()
        answers = await board.cancel_on_server(["stopme", "unknown-id"])
        assert record.cancelling
        await settle(record)
        again = await board.cancel_on_server(["stopme"])
    assert answers == {"stopme": "cancelled_running"}  # unknown ids are not the board's
    assert again == {}  # finished: nothing to cancel
    assert statuses(record) == [Q, R, C]
    assert record.skipped_phases() == {G: "ended_early"}
    [cancel] = record.cancels
    assert cancel.disposition == "cancelled_running" and cancel.error is None
    assert cancel.answered_at is not None and cancel.answered_at >= cancel.requested_at
    assert record.latest_result is not None and record.latest_result.err_message == "cancelled"


async def test_a_lease_that_expired_before_a_poll_arrived(serve: Serve) -> None:
    board = RolloutBoard()
    # The second GET is held back past the 0.5 s lease, so the server fails the rollout.
    transport = FaultyTransport(None, 0.8)
    async with (
        real_server(serve, wait=0.1, lease=0.5) as srv,
        httpx.AsyncClient(transport=transport) as http,
    ):
        client = srv.client(http_client=http)
        record = await track(board, client, "expired", label="42", metadata={"sleep": 5})
        await settle(record)
    assert statuses(record)[0] is Q and statuses(record)[-1] is F
    result = record.latest_result
    assert result is not None and result.err_category is not None
    assert result.err_category.value == "lease_expired"
    assert result.err_message == "polling lease expired"
    assert record.skipped_phases().get(G) == "ended_early"


async def test_stop_tracking_sends_nothing_and_keeps_the_row(serve: Serve) -> None:
    untracked: list[str] = []
    board = RolloutBoard(on_untrack=lambda record: untracked.append(record.rollout_id))
    async with real_server(serve) as srv, srv.client() as client:
        record = await track(board, client, "left", label="42", metadata={"sleep": 0.5})
        assert record.handle is not None
        await record.handle.wait_for_running()
        posts_before = srv.recorder.count("POST", "/rollout/cancel")
        assert board.stop_tracking(["left"]) == ["left"]
        assert board.stop_tracking(["left"]) == []  # once
        assert untracked == ["left"]  # the hook hears of it once too
        await settle(record)
        assert srv.recorder.count("POST", "/rollout/cancel") == posts_before
        await asyncio.sleep(0.7)
        entry = srv.app.state.rollout_futures["left"]
    assert record.untracked and not record.in_flight
    assert entry.result is not None and entry.result.status is S  # the server finished it
    # Counted as untracked, no longer as running: nobody watches it go on.
    counts = board.counts()
    assert (counts["untracked"], counts["running"], counts["total"]) == (1, 0, 1)


def test_a_replayed_cancel_joins_the_history_once_and_ends_with_the_rollout() -> None:
    board = RolloutBoard()
    board.observe("r", R, 1.0, row_index=0, run_index=0)
    board.take_changes()
    cancel = CancelRequest(requested_at=2.0)
    board.observe_cancel("r", cancel)
    record = board.records["r"]
    assert record.cancels == (cancel,) and record.cancelling
    assert board.take_changes().ids == {"r"}
    cancel.disposition = "cancelled_running"
    board.observe_cancel("r", cancel)  # its answer: shown, not added again
    assert record.cancels == (cancel,) and board.take_changes().ids == {"r"}
    board.observe("r", C, 2.5)
    assert cancel.answered_at == 2.5 and not record.cancelling
    board.observe_cancel("elsewhere", CancelRequest(requested_at=3.0))  # not on the board
    assert "elsewhere" not in board.records


async def test_change_batches_hold_each_changed_id_once(serve: Serve) -> None:
    board = RolloutBoard()
    first = board.take_changes()
    assert first.ids == frozenset() and first.added == ()
    async with real_server(serve) as srv, srv.client() as client:
        records = [
            await track(board, client, f"b{n}", label="42", metadata={"sleep": 0.1})
            for n in range(3)
        ]
        batch = board.take_changes()
        assert set(batch.added) == {"b0", "b1", "b2"}
        for record in records:
            await settle(record)
    later = board.take_changes()
    assert later.version == batch.version + 1
    assert later.ids == {"b0", "b1", "b2"} and later.added == ()
    assert board.take_changes().ids == frozenset()


def test_stuck_detection_counts_filters_and_admission_failures() -> None:
    board = RolloutBoard()
    for n in range(5):  # finished running phases of 1 s set the median
        board.observe(f"done{n}", Q, 0.0, grade=True)
        board.observe(f"done{n}", R, 0.0)
        board.observe(f"done{n}", S, 1.0)
    board.observe("slow", Q, 0.0, grade=True)
    board.observe("slow", R, 0.0)
    board.record_not_admitted("nope", "POST /rollout returned 409; only 202 and 429 are accepted")
    assert board.stuck_threshold(R) == 30.0  # three times a 1 s median is below the floor
    assert not board.is_stuck(board.records["slow"], now=29.0)
    assert board.is_stuck(board.records["slow"], now=31.0)
    counts = board.counts(now=31.0)
    assert counts["success"] == 5 and counts["running"] == 1 and counts["stuck"] == 1
    assert counts["not_admitted"] == 1 and counts["total"] == 7
    assert [r.rollout_id for r in board.select(stuck_only=True, now=31.0)] == ["slow"]
    assert [r.rollout_id for r in board.select(text="409")] == ["nope"]
    assert [r.rollout_id for r in board.select(statuses=frozenset({"running"}))] == ["slow"]
    fixed = RolloutBoard(stuck_after_sec=5)
    fixed.observe("s", Q, 0.0)
    assert fixed.is_stuck(fixed.records["s"], now=6.0)


def test_records_never_hold_the_llm_api_key() -> None:
    assert "llm_api_key" not in RequestOptions.__dataclass_fields__


# -- model calls (reported by the eval's gateway) --------------------------------------------


def model_call(rollout_id: str, call_id: int, started: float) -> ModelCall:
    return ModelCall(
        call_id=call_id,
        rollout_id=rollout_id,
        streamed=False,
        requested_model="osmosis-rollout",
        started_at=1_700_000_000.0 + started,
        started_monotonic=started,
        request_text="What is 2 * 3?",
    )


def ended(call: ModelCall, at: float, *, status: int | None = 200, **outcome: Any) -> ModelCall:
    wall = call.started_at + at - call.started_monotonic
    return replace(call, ended_at=wall, ended_monotonic=at, status=status, **outcome)


def test_a_model_call_shows_in_flight_then_ends_with_its_tokens_and_cost() -> None:
    board = RolloutBoard()
    board.observe("r1", R, 10.0)
    board.take_changes()
    call = model_call("r1", 1, started=11.0)
    board.call_started(call)
    activity = board.records["r1"].model
    assert board.take_changes().ids == {"r1"}  # repainted while it runs
    assert (activity.calls, activity.waiting_since, activity.latest()) == (1, 11.0, call)
    assert (activity.tokens, activity.last_ended_at) == (None, None)
    board.call_ended(ended(call, 12.5, total_tokens=19, cost_usd=0.25, reply_text="6"))
    assert board.take_changes().ids == {"r1"}
    assert activity.in_flight == {} and activity.waiting_since is None
    assert (activity.tokens, activity.cost_usd, activity.last_ended_at) == (19, 0.25, 12.5)
    assert [c.reply_text for c in activity.recent] == ["6"]
    assert (board.total_tokens, board.total_cost_usd, board.model_calls) == (19, 0.25, 1)
    # A failed call counts, adds no tokens, and a call without a price leaves the cost as is.
    second = model_call("r1", 2, started=13.0)
    board.call_started(second)
    board.call_ended(ended(second, 13.2, status=502, error="upstream down"))
    assert (activity.calls, activity.failed, activity.tokens, activity.cost_usd) == (2, 1, 19, 0.25)
    assert board.total_tokens == 19


def test_calls_made_before_the_rollout_is_on_the_board_are_kept_for_it() -> None:
    # A workflow may call the model before the admission answer has reached the runner.
    board = RolloutBoard()
    call = model_call("early", 1, started=1.0)
    board.call_started(call)
    assert board.take_changes().ids == set()  # nothing to repaint yet
    record = board.observe("early", Q, 1.1)
    assert record.model.in_flight == {1: call}
    board.call_ended(ended(call, 1.4, total_tokens=5))
    assert (record.model.tokens, board.total_tokens) == (5, 5)


def test_a_record_keeps_its_latest_calls_and_counts_every_one() -> None:
    board = RolloutBoard()
    board.observe("busy", R, 0.0)
    for n in range(1, MODEL_CALLS_KEPT + 11):
        call = model_call("busy", n, started=float(n))
        board.call_started(call)
        board.call_ended(ended(call, n + 0.5, total_tokens=1))
    activity = board.records["busy"].model
    assert len(activity.recent) == MODEL_CALLS_KEPT
    assert activity.recent[0].call_id == 11
    assert (activity.calls, activity.tokens) == (MODEL_CALLS_KEPT + 10, MODEL_CALLS_KEPT + 10)


def test_a_finished_rollouts_calls_read_back_from_the_spill_file(tmp_path: Path) -> None:
    activity = ModelActivity()
    activity.spill_to(SpillFile(tmp_path))  # nothing ended yet: nothing to keep elsewhere
    calls = [model_call("done", n, started=float(n)) for n in (1, 2, 3)]
    for call in calls[:2]:
        activity.started(call)
        activity.ended(ended(call, call.started_monotonic + 0.5, reply_text=f"r{call.call_id}"))
    kept = activity.recent
    activity.started(calls[2])  # abandoned later, after its rollout ended
    spill = SpillFile(tmp_path)
    activity.spill_to(spill)
    # Read back as they were, each time; the counts and the latest call stay at hand.
    assert activity.recent == kept and activity.recent is not activity.recent
    assert activity.latest() == calls[2] and activity.calls == 3
    activity.ended(ended(calls[2], 4.0, status=None))
    assert [call.call_id for call in activity.recent] == [1, 2, 3]
    assert activity.recent is activity.recent  # back in memory with the late call
    assert activity.failed == 1 and activity.latest() is not None
