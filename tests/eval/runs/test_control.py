"""Steering a running eval (DESIGN.md §2): pause and resume dispatch, max-in-flight up and down,
requeue, and the record each leaves in logs.txt and transitions.jsonl, with untracks and
rollouts sent by hand.

An in-process eval session against a real server_stub under uvicorn on the test's own loop
(tests/reliability/in_process.py), running `Held`: each rollout waits in its workflow until
the test lets one go, so what is in flight is decided by the test, and every assertion is on
counts (admissions the server saw, rollouts in the workflow), never on how long something took.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from core.eval import EvalRequest, EvalSession, EvalSummary, prepare
from core.eval.runner import ControlRefused, EvalRunner
from core.rollout_record import RequestOptions
from server_stub import AgentWorkflow, AgentWorkflowOutput
from server_stub.workflow import AgentWorkflowContext
from tests.eval.runs.files import read_jsonl, write_jsonl
from tests.polling import eventually
from tests.reliability.in_process import demo_app, rollout_server
from tests.server.plugins import ExactMatch


class Held(AgentWorkflow[Any]):
    """Waits for a permit (`let_go`), then answers "42"; counts the rollouts waiting now."""

    permits: ClassVar[asyncio.Semaphore]
    running: ClassVar[int]

    @classmethod
    def reset(cls) -> None:
        cls.permits = asyncio.Semaphore(0)
        cls.running = 0

    @classmethod
    def let_go(cls, count: int = 1) -> None:
        for _ in range(count):
            cls.permits.release()

    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        cls = type(self)
        cls.running += 1
        try:
            await cls.permits.acquire()
        finally:
            cls.running -= 1
        return AgentWorkflowOutput(messages=[*ctx.prompt, {"role": "assistant", "content": "42"}])


def rows(count: int) -> list[dict[str, Any]]:
    return [{"user_prompt": f"question {n}", "ground_truth": "42"} for n in range(count)]


@dataclass
class Steered:
    """A session running in the background, the server's registry and the run's folder."""

    session: EvalSession
    running: asyncio.Future[EvalSummary]
    server: Any
    folder: Path

    @property
    def runner(self) -> EvalRunner:
        runner = self.session.runner
        assert runner is not None
        return runner

    @property
    def admitted(self) -> int:
        """Rollouts the server was sent."""
        return len(self.server.state.rollout_futures)

    def server_status(self, rollout_id: str) -> str | None:
        entry = self.server.state.rollout_futures.get(rollout_id)
        return None if entry is None or entry.result is None else entry.result.status.value

    async def finish(self) -> EvalSummary:
        Held.let_go(1000)
        return await asyncio.wait_for(self.running, 60)

    def control_lines(self) -> list[dict[str, Any]]:
        return [t for t in self.transitions() if t["kind"] == "control"]

    def transitions(self) -> list[dict[str, Any]]:
        return read_jsonl(self.folder / "transitions.jsonl")

    def logged(self) -> list[str]:
        """logs.txt's `[control]` lines, without their time stamps."""
        lines = (self.folder / "logs.txt").read_text().splitlines()
        return [line.split(" ", 1)[1] for line in lines if " [control] " in line]


@asynccontextmanager
async def steered_eval(tmp_path: Path, count: int, max_in_flight: int) -> AsyncIterator[Steered]:
    Held.reset()
    app = demo_app(workflow=Held, grader=ExactMatch, max_concurrent=16)
    async with rollout_server(app) as url:
        plan = prepare(
            EvalRequest(
                servers=(url,),
                dataset_file=write_jsonl(tmp_path / "rows.jsonl", rows(count)),
                output=tmp_path / "out",
                name="steered",
                chat_url="stub",
                max_in_flight=max_in_flight,
            )
        )
        session = EvalSession(plan)
        running = asyncio.ensure_future(session.run())
        steered = Steered(session, running, app, tmp_path / "out" / "steered")
        try:
            await eventually(lambda: session.runner is not None, "the runner to start")
            yield steered
        finally:
            if not running.done():
                Held.let_go(1000)
                await asyncio.wait_for(running, 60)


def in_flight(steered: Steered) -> int:
    return sum(1 for record in steered.session.board if record.in_flight)


async def test_a_paused_run_sends_nothing_until_resumed(tmp_path: Path) -> None:
    async with steered_eval(tmp_path, 6, max_in_flight=2) as run:
        await eventually(lambda: Held.running == 2, "two rollouts in the workflow")
        run.session.control.pause()
        assert run.session.control.state().paused
        Held.let_go(1000)  # every rollout may finish now: only the pause holds the rest
        # A worker back from its item finds the pause before anything else: once none is in
        # flight, none can be sent.
        await eventually(
            lambda: len(run.session.results) == 2 and run.runner.running_items == 0,
            "the two in flight to finish",
        )
        assert run.runner.gate.waiting == 2, "both workers wait for the resume"
        assert run.admitted == 2
        assert len(run.session.board) == 2
        assert len(run.runner.pending) == 4
        run.session.control.resume()
        summary = await run.finish()
    assert summary.status == "complete"
    assert run.admitted == 6
    assert len(read_jsonl(run.folder / "events.jsonl")) == 6
    assert [(t["action"], t.get("value")) for t in run.control_lines()] == [
        ("pause", None),
        ("resume", None),
    ]
    assert run.logged() == [
        "INFO [control] dispatch paused: no new work item is sent; those in flight go on "
        '{"in_flight":2}',
        "INFO [control] dispatch resumed",
    ]


async def test_a_pause_asked_for_before_the_servers_are_up_holds_from_the_first_item(
    tmp_path: Path,
) -> None:
    Held.reset()
    app = demo_app(workflow=Held, grader=ExactMatch)
    async with rollout_server(app) as url:
        plan = prepare(
            EvalRequest(
                servers=(url,),
                dataset_file=write_jsonl(tmp_path / "rows.jsonl", rows(3)),
                output=tmp_path / "out",
                name="early",
                chat_url="stub",
            )
        )
        session = EvalSession(plan)
        session.control.pause()
        assert session.control.state().paused
        running = asyncio.ensure_future(session.run())
        await eventually(lambda: session.runner is not None, "the runner to start")
        runner = session.runner
        assert runner is not None
        # Every worker is started and waiting at the gate: none can send anything.
        await eventually(lambda: runner.gate.waiting == 3, "the workers at the gate")
        assert runner.gate.paused and runner.running_items == 0
        assert not app.state.rollout_futures
        session.control.resume()
        Held.let_go(3)
        summary = await asyncio.wait_for(running, 60)
    assert summary.status == "complete"
    lines = read_jsonl(tmp_path / "out" / "early" / "transitions.jsonl")
    assert [t["action"] for t in lines if t["kind"] == "control"] == ["pause", "resume"]


async def test_max_in_flight_up_and_down_is_what_is_in_flight(tmp_path: Path) -> None:
    async with steered_eval(tmp_path, 8, max_in_flight=2) as run:
        control = run.session.control
        await eventually(lambda: Held.running == 2, "two rollouts in the workflow")
        assert control.state().max_in_flight == 2
        assert control.set_max_in_flight(3) == 3
        await eventually(lambda: Held.running == 3, "a third rollout in the workflow")
        assert run.admitted == 3

        # Lowered: nothing is cancelled, and nothing new is sent until none is in flight.
        assert control.set_max_in_flight(1) == 1
        Held.let_go(2)
        await eventually(
            lambda: len(run.session.results) == 2 and run.runner.running_items == 1,
            "two of the three to finish",
        )
        assert run.admitted == 3
        assert in_flight(run) == 1
        assert not [r for r in run.session.board if r.cancels]
        Held.let_go(1)  # the last of them: one new takes its place
        await eventually(lambda: run.admitted == 4 and Held.running == 1, "the fourth sent")
        assert run.runner.running_items == 1

        # Raised past the server's capacity (16): capped, and every item left is sent.
        assert control.set_max_in_flight(100) == 16
        await eventually(lambda: Held.running == 5, "the four left sent beside the fourth")
        assert run.runner.running_items == 5
        summary = await run.finish()
    assert summary.status == "complete"
    assert run.admitted == 8
    assert [t.get("value") for t in run.control_lines()] == [3, 1, 16]
    assert [t["action"] for t in run.control_lines()] == ["max_in_flight"] * 3
    assert run.logged() == [
        'INFO [control] max in flight 2 -> 3 {"max_in_flight":3,"requested":3}',
        'INFO [control] max in flight 3 -> 1 {"max_in_flight":1,"requested":1}',
        'INFO [control] max in flight 1 -> 16 {"max_in_flight":16,"requested":100}',
    ]


async def test_requeue_cancels_the_rollout_and_journals_the_item_once_under_its_new_id(
    tmp_path: Path,
) -> None:
    async with steered_eval(tmp_path, 2, max_in_flight=2) as run:
        await eventually(lambda: Held.running == 2, "both rollouts in the workflow")
        board = run.session.board
        old = next(r.rollout_id for r in board if r.row_index == 0)
        new = run.session.control.requeue(old)
        assert new != old and len(new) == 32
        assert board.records[old].requeued_as == new
        await eventually(lambda: run.server_status(old) == "cancelled", "the old one cancelled")
        # The old one's place is free once it has ended: the item is sent again at once.
        await eventually(lambda: Held.running == 2 and new in board.records, "the new one sent")
        assert board.records[new].row_index == 0 and board.records[new].run_index == 0
        with pytest.raises(ControlRefused):
            run.session.control.requeue(old)  # once is enough
        summary = await run.finish()
    assert summary.status == "complete"
    assert run.admitted == 3
    events = read_jsonl(run.folder / "events.jsonl")
    assert sorted((e["row_index"], e["rollout_id"]) for e in events if e["row_index"] == 0) == [
        (0, new)
    ]
    assert len(events) == 2
    index = {e["row_index"]: e for e in read_jsonl(run.folder / "index.jsonl")}
    assert index[0]["rollout_id"] == new and index[0]["status"] == "success"
    assert board.records[old].status.value == "cancelled"

    lines = run.transitions()
    requeues = [t for t in lines if t["kind"] == "requeue"]
    assert [{k: v for k, v in t.items() if k != "t"} for t in requeues] == [
        {
            "kind": "requeue",
            "rollout_id": old,
            "new_rollout_id": new,
            "row_index": 0,
            "run_index": 0,
        }
    ]
    # The requeue comes first, then the old one's cancel, then the new one's statuses.
    order = [
        (t["kind"], t.get("rollout_id"))
        for t in lines
        if t["kind"] in ("requeue", "cancel_request") or t.get("rollout_id") == new
    ]
    assert order[:2] == [("requeue", old), ("cancel_request", old)]
    assert order[-1] == ("status", new)
    cancels = [t for t in lines if t["kind"] == "cancel_request" and t["rollout_id"] == old]
    assert cancels[-1]["disposition"] == "cancelled_running"
    details = {"new_rollout_id": new, "rollout_id": old, "row_index": 0, "run_index": 0}
    requeued, *cancel = run.logged()
    assert requeued == (
        "INFO [control] work item requeued: its rollout is cancelled and the item runs again "
        "under a new id " + json.dumps(details, separators=(",", ":"), sort_keys=True)
    )
    # The cancel it asks of the server, and the answer, as every cancel is logged.
    assert [line.split(" {", 1)[0] for line in cancel] == [
        "INFO [control] cancel asked of the rollout's server",
        "INFO [control] its server answered the cancel: cancelled_running",
    ]
    assert all(f'"rollout_id":"{old}"' in line for line in cancel)


async def test_a_refused_requeue_quotes_the_id_it_was_given_escaped(tmp_path: Path) -> None:
    """The id is the asker's text: one with a line break and a terminal escape in it is named
    on one line, escaped, so it cannot forge a log line or steer the terminal showing it."""
    async with steered_eval(tmp_path, 1, max_in_flight=1) as run:
        await eventually(lambda: Held.running == 1, "the rollout in the workflow")
        forged = "r1\n12:00:00 INFO [control] work item requeued\x1b[2J"
        with pytest.raises(ControlRefused) as refused:
            run.session.control.requeue(forged)
        assert str(refused.value) == (
            'rollout "r1\\n12:00:00 INFO [control] work item requeued\\x1b[2J" '
            "is no work item's attempt in flight"
        )
        summary = await run.finish()
    assert summary.status == "complete"


async def test_a_requeue_while_paused_waits_for_the_resume(tmp_path: Path) -> None:
    async with steered_eval(tmp_path, 1, max_in_flight=1) as run:
        await eventually(lambda: Held.running == 1, "the rollout in the workflow")
        run.session.control.pause()
        old = next(iter(run.session.board.records))
        new = run.session.control.requeue(old)
        await eventually(lambda: run.server_status(old) == "cancelled", "the old one cancelled")
        await eventually(lambda: run.runner.gate.waiting == 1, "its worker back at the gate")
        assert run.runner.running_items == 0
        assert run.admitted == 1
        run.session.control.resume()
        await eventually(lambda: new in run.session.board.records, "the new one sent")
        summary = await run.finish()
    assert summary.status == "complete"
    assert [e["rollout_id"] for e in read_jsonl(run.folder / "events.jsonl")] == [new]


async def test_an_untracked_rollout_is_recorded_and_can_still_be_requeued(
    tmp_path: Path,
) -> None:
    # Two rows: a run whose only rollout in flight is untracked has nothing left to wait for.
    async with steered_eval(tmp_path, 2, max_in_flight=2) as run:
        await eventually(lambda: Held.running == 2, "both rollouts in the workflow")
        board = run.session.board
        old = next(r.rollout_id for r in board if r.row_index == 0)
        assert board.stop_tracking([old]) == [old]
        await eventually(lambda: run.runner.running_items == 1, "its worker to let go of it")
        assert run.server_status(old) is None, "the server still runs it"
        new = run.session.control.requeue(old)
        await eventually(lambda: run.server_status(old) == "cancelled", "the old one cancelled")
        await eventually(lambda: new in board.records, "the new one sent")
        summary = await run.finish()
    assert summary.status == "complete"
    events = read_jsonl(run.folder / "events.jsonl")
    assert sorted(e["rollout_id"] for e in events if e["row_index"] == 0) == [new]
    assert len(events) == 2
    untracks = [t for t in run.transitions() if t["kind"] == "untrack"]
    assert [{k: v for k, v in t.items() if k != "t"} for t in untracks] == [
        {"kind": "untrack", "rollout_id": old, "row_index": 0, "run_index": 0}
    ]
    details = {"rollout_id": old, "row_index": 0, "run_index": 0}
    assert run.logged()[0] == (
        "INFO [control] stopped tracking a rollout; its server keeps it until its lease ends "
        + json.dumps(details, separators=(",", ":"), sort_keys=True)
    )


async def test_a_rollout_sent_by_hand_is_marked_and_recorded_but_never_journaled(
    tmp_path: Path,
) -> None:
    async with steered_eval(tmp_path, 1, max_in_flight=1) as run:
        await eventually(lambda: Held.running == 1, "the work item in the workflow")
        options = RequestOptions(
            initial_messages=({"role": "user", "content": "by hand"},),
            chat_completions_url="",
            label="42",
        )
        manual = await run.session.submit(options)
        record = run.session.board.records[manual]
        assert record.manual and record.run_index is None
        assert run.session.control.state().manual == 1
        with pytest.raises(ControlRefused):
            run.session.control.requeue(manual)  # no work item to run again
        Held.let_go(2)
        await eventually(lambda: record.finished, "the rollout sent by hand to finish")
        assert run.session.progress().total == 1
        summary = await run.finish()
    assert summary.status == "complete"
    events = read_jsonl(run.folder / "events.jsonl")
    assert [e["row_index"] for e in events] == [0]
    assert manual not in {e["rollout_id"] for e in events}
    lines = [t for t in run.transitions() if t.get("rollout_id") == manual]
    assert lines[0]["kind"] == "status" and "row_index" not in lines[0]
    assert lines[1] == {"kind": "manual", "rollout_id": manual, "t": lines[1]["t"]}
    assert lines[-1]["status"] == "success"
    assert run.logged() == [
        "INFO [control] rollout sent by hand, outside the work items "
        + json.dumps(
            {"rerun_of": None, "rollout_id": manual, "row_index": None},
            separators=(",", ":"),
            sort_keys=True,
        )
    ]
