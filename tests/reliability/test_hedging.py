"""The long tail (issue 28 items 1, 2): hedging a slow rollout on another server, and requeueing
a stuck one by rule, over real HTTP against two rollout servers on the test's loop.

The servers share one script (`Tail`): what each attempt of a row does (hang until cancelled,
wait for the other attempt, fail, answer) is said by the row and by how many attempts of it
came before, never by a clock, so every outcome asserted here is the only one possible.
Whatever the order the attempts end in, events.jsonl must hold exactly one record per item.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from core.eval.attach.protocol import dispatch_from, dispatch_state
from core.eval.hedging import HedgeAfter
from server_stub import AgentWorkflowContext, AgentWorkflowOutput
from server_stub.demo import MultiplyWorkflow
from server_stub.workflow import AgentWorkflowConfig
from tests.eval.runs.command import child_env, osmosis
from tests.eval.runs.files import multiply_rows, read_jsonl
from tests.polling import eventually
from tests.reliability.in_process import demo_app, rollout_server, run_session
from tui.sources.replay import ReplaySource
from tui.widgets.details import describe

# What an attempt does before it answers as the demo does: given the row's prompt and how many
# attempts of it started before this one (on either server).
Act = Callable[["Tail", str, int], Awaitable[None]]


@dataclass
class Tail:
    """The script both servers follow, and what they did."""

    act: Act
    started: Counter[str] = field(default_factory=Counter)
    #: (server, prompt, attempt) of every attempt, as it started.
    attempts: list[tuple[str, str, int]] = field(default_factory=list)
    #: (server, prompt, attempt) of every attempt cancelled on its server.
    cancelled: list[tuple[str, str, int]] = field(default_factory=list)
    second_started: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set when the test leaves its servers: what still hangs then ends (a server left with
    #: a rollout running waits for it before it stops).
    over: asyncio.Event = field(default_factory=asyncio.Event)

    async def hang(self) -> None:
        """Until the attempt is cancelled, or the test is over."""
        await self.over.wait()

    def workflow(self, server: str) -> type[MultiplyWorkflow]:
        tail = self

        class Scripted(MultiplyWorkflow):
            async def run(
                self, ctx: AgentWorkflowContext[AgentWorkflowConfig]
            ) -> AgentWorkflowOutput:
                prompt = str(ctx.prompt[-1]["content"])
                attempt = tail.started[prompt]
                tail.started[prompt] += 1
                tail.attempts.append((server, prompt, attempt))
                if attempt == 1:
                    tail.second_started.set()
                try:
                    await tail.act(tail, prompt, attempt)
                except asyncio.CancelledError:
                    tail.cancelled.append((server, prompt, attempt))
                    raise
                return await super().run(ctx)

        return Scripted


async def hang_first(prompts: set[str]) -> Act:
    """The first attempt of each of `prompts` hangs until cancelled; the others answer."""

    async def act(tail: Tail, prompt: str, attempt: int) -> None:
        if prompt in prompts and attempt == 0:
            await tail.hang()

    return act


@asynccontextmanager
async def two_servers(tail: Tail) -> AsyncIterator[tuple[str, str]]:
    async with AsyncExitStack() as stack:
        urls = [
            await stack.enter_async_context(rollout_server(demo_app(workflow=tail.workflow(n))))
            for n in ("a", "b")
        ]
        try:
            yield urls[0], urls[1]
        finally:
            tail.over.set()


def journal(folder: Path) -> list[dict[str, Any]]:
    return read_jsonl(folder / "events.jsonl")


def transitions(folder: Path, reason: str) -> list[dict[str, Any]]:
    return [
        line
        for line in read_jsonl(folder / "transitions.jsonl")
        if line.get("kind") == "requeue" and line.get("reason") == reason
    ]


def one_record_per_item(folder: Path, items: int) -> dict[tuple[int, int], dict[str, Any]]:
    records = journal(folder)
    keys = Counter((r["row_index"], r["run_index"]) for r in records)
    assert len(keys) == items and set(keys.values()) == {1}, keys
    return {(r["row_index"], r["run_index"]): r for r in records}


def prompt_of(row: dict[str, Any]) -> str:
    return str(row["user_prompt"])


async def test_a_hedge_on_the_other_server_wins_and_the_slow_attempt_is_cancelled(
    tmp_path: Path,
) -> None:
    rows = multiply_rows(8)
    slow = {prompt_of(rows[1]), prompt_of(rows[5])}
    tail = Tail(await hang_first(slow))
    async with two_servers(tail) as urls:
        run = await run_session(
            tmp_path,
            rows,
            servers=urls,
            chat_url="stub",
            max_in_flight=4,
            hedge_after=HedgeAfter(seconds=0.3),
        )
        await eventually(lambda: len(tail.cancelled) == 2, "the slow attempts cancelled")
    assert run.summary.status == "complete"
    assert run.summary.tail == {"hedges_sent": 2, "hedges_won": 2, "requeued_by_rule": 0}
    records = one_record_per_item(run.folder, 8)
    assert all(r["status"] == "success" for r in records.values())
    hedges = transitions(run.folder, "hedge")
    assert {records[h["row_index"], h["run_index"]]["rollout_id"] for h in hedges} == {
        h["new_rollout_id"] for h in hedges
    }
    # The slow attempts were cancelled on their server, and each hedge ran on the other one.
    assert {(prompt, attempt) for _, prompt, attempt in tail.cancelled} == {(p, 0) for p in slow}
    servers = {(prompt, attempt): server for server, prompt, attempt in tail.attempts}
    assert all(servers[p, 0] != servers[p, 1] for p in slow)
    logs = (run.folder / "logs.txt").read_text()
    assert logs.count("work item hedged (--hedge-after)") == 2
    envelope = run.summary.to_json()
    assert envelope["tail"] == {"hedges_sent": 2, "hedges_won": 2, "requeued_by_rule": 0}
    # What attach's STATE tells a viewer of the run's dispatch, read back as a viewer does.
    told = dispatch_from(json.loads(json.dumps(dispatch_state(run.session.control.state()))))
    assert told is not None and (told.hedges_sent, told.hedges_won) == (2, 2)
    # Replayed: the hedges, and which won, as the live strip showed them.
    replay = ReplaySource(run.folder)
    replay.to_end()
    dispatch = replay.dispatch()
    assert dispatch is not None and (dispatch.hedges_sent, dispatch.hedges_won) == (2, 2)
    assert replay.warnings == []
    # The details of a hedged item: both its attempts are on the board, under its row, and
    # each names the other, live and replayed.
    attempts = Counter((r.row_index, r.run_index) for r in replay.board)
    assert {key for key, count in attempts.items() if count == 2} == {
        (h["row_index"], h["run_index"]) for h in hedges
    }
    pairs = {(h["rollout_id"], h["new_rollout_id"]) for h in hedges}
    for board in (run.session.board, replay.board):
        for first, hedge in pairs:
            assert board.records[first].hedged_with == hedge
            assert board.records[hedge].hedged_with == first
    first, hedge = sorted(pairs)[0]
    shown = Console(width=200, record=True, file=io.StringIO())
    shown.print(describe(replay.board.records[first], replay.board, replay.clock()))
    assert f"its work item's other attempt is {hedge}" in shown.export_text()


async def test_two_attempts_that_finish_together_give_one_record(tmp_path: Path) -> None:
    rows = multiply_rows(1)

    async def together(tail: Tail, prompt: str, attempt: int) -> None:
        # The first waits for the hedge to start; then both answer at once.
        await tail.second_started.wait()

    tail = Tail(together)
    async with two_servers(tail) as urls:
        run = await run_session(
            tmp_path, rows, servers=urls, chat_url="stub", hedge_after=HedgeAfter(seconds=0.3)
        )
    assert run.summary.status == "complete"
    records = one_record_per_item(run.folder, 1)
    (hedge,) = transitions(run.folder, "hedge")
    assert records[0, 0]["status"] == "success"
    assert records[0, 0]["rollout_id"] in (hedge["rollout_id"], hedge["new_rollout_id"])
    won = records[0, 0]["rollout_id"] == hedge["new_rollout_id"]
    assert run.summary.tail == {"hedges_sent": 1, "hedges_won": int(won), "requeued_by_rule": 0}


#: Longer than any test here waits: an attempt this slow only ends by its cancel.
LATER_SEC = 120.0


async def test_the_first_attempt_to_finish_wins_a_failure_too(tmp_path: Path) -> None:
    """Row 0: the first attempt fails once the hedge started, the hedge would answer much
    later. Row 1: the hedge fails at once, the first attempt would answer much later. The
    first to finish decides each item, failure or not (a hedge is no second chance to pass),
    and the other attempt is cancelled on its server."""
    rows = multiply_rows(2)
    first_fails, hedge_fails = prompt_of(rows[0]), prompt_of(rows[1])

    async def act(tail: Tail, prompt: str, attempt: int) -> None:
        if attempt == 0 and prompt == first_fails:
            await tail.second_started.wait()
            raise RuntimeError("the first attempt fails")
        if attempt == 1 and prompt == hedge_fails:
            raise RuntimeError("the hedge fails")
        await asyncio.sleep(LATER_SEC)  # ended by its cancel, long before

    tail = Tail(act)
    async with two_servers(tail) as urls:
        run = await run_session(
            tmp_path,
            rows,
            servers=urls,
            chat_url="stub",
            max_in_flight=4,
            hedge_after=HedgeAfter(seconds=0.3),
        )
        await eventually(lambda: len(tail.cancelled) == 2, "the later attempts cancelled")
    records = one_record_per_item(run.folder, 2)
    assert all(r["status"] == "failed" for r in records.values())
    hedge_of = {(h["row_index"], h["run_index"]): h for h in transitions(run.folder, "hedge")}
    assert records[0, 0]["rollout_id"] == hedge_of[0, 0]["rollout_id"]
    assert records[1, 0]["rollout_id"] == hedge_of[1, 0]["new_rollout_id"]
    assert run.summary.tail == {"hedges_sent": 2, "hedges_won": 1, "requeued_by_rule": 0}
    # The attempt that lost, still running, was cancelled on its server.
    assert {(prompt, attempt) for _, prompt, attempt in tail.cancelled} == {
        (first_fails, 1),
        (hedge_fails, 0),
    }


async def test_both_attempts_failing_give_one_failed_record(tmp_path: Path) -> None:
    async def act(tail: Tail, prompt: str, attempt: int) -> None:
        await tail.second_started.wait()
        raise RuntimeError(f"attempt {attempt} fails")

    tail = Tail(act)
    async with two_servers(tail) as urls:
        run = await run_session(
            tmp_path,
            multiply_rows(1),
            servers=urls,
            chat_url="stub",
            hedge_after=HedgeAfter(seconds=0.3),
        )
    records = one_record_per_item(run.folder, 1)
    (hedge,) = transitions(run.folder, "hedge")
    # The first failure is the item's: whichever attempt that was.
    assert records[0, 0]["status"] == "failed"
    assert records[0, 0]["rollout_id"] in (hedge["rollout_id"], hedge["new_rollout_id"])
    assert run.summary.tail is not None and run.summary.tail["hedges_sent"] == 1


async def test_a_stuck_rollout_is_requeued_by_rule_at_most_n_times(tmp_path: Path) -> None:
    """Row 0 hangs on its first attempt only; every attempt of row 1 hangs for far longer than
    it takes to be flagged stuck, then fails: requeued once (N = 1), then journaled failed."""
    rows = multiply_rows(3)
    once, always = prompt_of(rows[0]), prompt_of(rows[1])

    async def act(tail: Tail, prompt: str, attempt: int) -> None:
        if prompt == once and attempt == 0:
            await tail.hang()
        if prompt == always:
            await asyncio.sleep(3)
            raise RuntimeError("stuck, then failed")

    tail = Tail(act)
    async with two_servers(tail) as urls:
        run = await run_session(
            tmp_path,
            rows,
            servers=urls,
            chat_url="stub",
            max_in_flight=4,
            stuck_after_sec=0.3,
            requeue_stuck=1,
        )
    records = one_record_per_item(run.folder, 3)
    assert records[0, 0]["status"] == "success"
    assert records[2, 0]["status"] == "success"
    assert records[1, 0]["status"] == "failed"
    rule = transitions(run.folder, "rule")
    assert Counter(line["row_index"] for line in rule) == {0: 1, 1: 1}
    assert records[0, 0]["rollout_id"] == next(
        line["new_rollout_id"] for line in rule if line["row_index"] == 0
    )
    await eventually(lambda: (once, 0) in {(p, a) for _, p, a in tail.cancelled}, "the cancel")
    assert run.summary.tail == {"hedges_sent": 0, "hedges_won": 0, "requeued_by_rule": 2}
    logs = (run.folder / "logs.txt").read_text()
    assert logs.count("(--requeue-stuck: it was stuck)") == 2
    replay = ReplaySource(run.folder)
    replay.to_end()
    dispatch = replay.dispatch()
    assert dispatch is not None and dispatch.requeued_by_rule == 2


async def killed_between_attempts(tmp_path: Path, flags: tuple[str, ...], reason: str) -> None:
    """An eval process killed (SIGKILL) while both attempts of the slow row hang, then
    resumed (where that row answers): every item is journaled exactly once."""
    rows = multiply_rows(4)
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    slow = prompt_of(rows[2])

    async def act(tail: Tail, prompt: str, attempt: int) -> None:
        if prompt == slow and attempt < 2:
            await tail.hang()

    tail = Tail(act)
    folder = tmp_path / "out" / "run"
    async with two_servers(tail) as urls:
        process = await asyncio.create_subprocess_exec(
            *osmosis(
                "eval",
                *("--server", urls[0], "--server", urls[1], "--chat-url", "stub"),
                *("--dataset-file", str(dataset), "--output", "out", "--name", "run"),
                *("--max-in-flight", "4", *flags),
            ),
            cwd=tmp_path,
            env=child_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            await eventually(tail.second_started.is_set, "the second attempt")
            await eventually(lambda: transitions(folder, reason), f"the {reason} journaled")
        finally:
            process.kill()
            await process.wait()
        before = journal(folder)
        assert (2, 0) not in {(r["row_index"], r["run_index"]) for r in before}
        run = await run_session(
            tmp_path, dataset, servers=urls, chat_url="stub", output=tmp_path / "out"
        )
    assert run.summary.status == "complete"
    records = one_record_per_item(run.folder, 4)
    assert all(r["status"] == "success" for r in records.values())


async def test_a_run_killed_between_a_hedge_and_its_first_attempt_resumes_each_item_once(
    tmp_path: Path,
) -> None:
    await killed_between_attempts(tmp_path, ("--hedge-after", "0.3"), "hedge")


async def test_a_run_killed_after_a_rule_requeue_resumes_each_item_once(tmp_path: Path) -> None:
    await killed_between_attempts(
        tmp_path, ("--stuck-after", "0.3", "--requeue-stuck", "1"), "rule"
    )
