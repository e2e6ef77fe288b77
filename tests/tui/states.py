"""Deterministic dashboard states for the snapshot tests and the README screenshots.

Every id, time and result is fixed: boards are filled through `RolloutBoard.observe(...)` at
chosen instants after a fixed start, the app's clock is frozen, and the source is static (it
runs nothing). The live behaviour is covered by the Pilot tests; these pin the pictures.
`python -m tests.tui.states` writes the screenshots/ SVGs from the same states.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from pytest_textual_snapshot import normalize_svg
from textual._doc import take_svg_screenshot
from textual.pilot import Pilot

from core.board import RolloutBoard
from core.eval.compare.baseline import Baseline, BaselineCounts
from core.eval.cost.spend import Spend, board_spend
from core.eval.dispatch_gate import DispatchState
from core.eval.event_silence import EventSilence
from core.eval.results import reward_stats
from core.eval.results.calls import ModelCall
from core.eval.results.metrics import Progress
from core.eval.results.records import ItemKey, ItemResult
from core.phases import PhaseMark
from core.rollout_record import (
    CancelRequest,
    RecordedRollout,
    RequestOptions,
    RolloutRecord,
)
from core.types import (
    CancelRolloutsResponse,
    RolloutErrorCategory,
    RolloutResultResponse,
    RolloutSample,
    RolloutStatus,
)
from tui.app import DashboardApp, create_app
from tui.sources.base import NewRollout, Player, RunEnding, ServerView
from tui.sources.pass_rule import PassRule
from tui.widgets.summary import SummaryStrip

T0 = 5_000.0  # the board's start, on the frozen monotonic clock
NOW = T0 + 95.0
WALL_T0 = 1_772_366_400.0  # the same instant on the wall clock: 2026-03-01 12:00:00 UTC
#: What a gpt-5-mini call of this size costs, as LiteLLM prices it.
CALL_COST_USD = 0.000021
SERVER = "http://127.0.0.1:8430"
CHAT_URL = "http://127.0.0.1:8431/v1"
THEME = "textual-dark"
SIZE = (150, 40)
SYSTEM_PROMPT = "You are a careful calculator. Reply with the number only."

Q, R, G = RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.GRADING
OK, FAIL, CANCELLED = RolloutStatus.SUCCESS, RolloutStatus.FAILURE, RolloutStatus.CANCELLED


def rollout_id(n: int) -> str:
    return hashlib.md5(f"rollout-{n}".encode()).hexdigest()


class StaticClient:
    """Stands in for a `RolloutClient` on a snapshot board: cancels answer without a network."""

    url = SERVER

    async def cancel_rollout(self, rollout_id: str) -> CancelRolloutsResponse:
        return CancelRolloutsResponse(dispositions={rollout_id: "cancelled_running"})


@dataclass
class StaticSource:
    """A `DashboardSource` over a prepared board: nothing runs, nothing is sent."""

    board: RolloutBoard
    total: int
    title: str = "multiply-20260301-120000"
    subtitle: str = "model openai/gpt-5-mini · dataset multiply · rollout multiply"
    read_only: bool = False
    finished: bool = False
    can_send: bool = True
    playback: Player | None = None
    sends_by_hand: bool = True
    is_watch: bool = False
    detaches_on_quit: bool = False
    servers_stop_with_run: bool = False
    server_states: list[ServerView] = field(
        default_factory=lambda: [ServerView(SERVER, "accepting")]
    )
    preview_root: Path | None = None
    trials_root: Path | None = None
    ending: RunEnding | None = None
    event_silence: EventSilence | None = None
    pass_rule: PassRule = field(default_factory=lambda: PassRule(1, 1.0))
    baseline: Baseline | None = None
    #: With a baseline: the counts against it (what a live run's tally would say).
    versus: BaselineCounts | None = None
    #: The run's spend as a live run's budget keeper would say (None: the board's sum).
    budget: Spend | None = None
    #: The run's dispatch as a live run's controls would say (None: nothing to steer).
    dispatch_state: DispatchState | None = None

    def baseline_counts(self) -> BaselineCounts | None:
        return self.versus

    def spend(self) -> Spend:
        if self.budget is not None:
            return self.budget
        return board_spend(self.board.total_cost_usd, self.progress())

    async def set_budget(self, usd: float) -> None:
        """As a live run's keeper: the new budget, and its pause lifted when within it."""
        spend = self.spend()
        within = spend.projected_usd is None or spend.projected_usd <= usd
        state = "within" if spend.state == "paused" and within else spend.state
        self.budget = replace(spend, budget_usd=usd, state=state)

    def progress(self) -> Progress:
        done = [r for r in self.board if r.finished]
        rewards = [
            r.latest_result.sample.reward
            for r in done
            if r.latest_result
            and r.latest_result.sample
            and r.latest_result.sample.reward is not None
        ]
        completed = [r for r in done if r.grade is not False]
        in_flight = sum(1 for r in self.board if r.in_flight)
        return Progress(
            done=len(done),
            total=self.total,
            passed=sum(1 for reward in rewards if reward >= 1.0),
            completed=len(completed),
            mean_reward=reward_stats.mean(rewards) if rewards else None,
            rewards_count=len(rewards),
            in_flight=in_flight,
            stuck=self.board.counts(NOW)["stuck"],
            # Untracked rollouts were dispatched: they are neither done nor waiting.
            not_dispatched=self.total - len(done) - in_flight - self.board.counts()["untracked"],
        )

    def servers(self) -> list[ServerView]:
        return self.server_states

    def carried_results(self) -> Mapping[ItemKey, ItemResult]:
        return {}

    async def run(self) -> None:
        return None

    async def interrupt(self, *, cancel_in_flight: bool) -> None:
        return None

    async def close(self) -> None:
        return None

    async def submit(self, rollout: NewRollout) -> str:
        raise RuntimeError("a static snapshot board sends nothing")

    async def rerun(self, rollout_id: str) -> str:
        raise RuntimeError("a static snapshot board sends nothing")

    def dispatch(self) -> DispatchState | None:
        return self.dispatch_state

    async def pause_dispatch(self, paused: bool) -> None:
        raise RuntimeError("a static snapshot board sends nothing")

    async def set_max_in_flight(self, limit: int) -> int:
        raise RuntimeError("a static snapshot board sends nothing")

    async def requeue(self, rollout_id: str) -> str:
        raise RuntimeError("a static snapshot board sends nothing")

    async def drain(self, url: str, *, drained: bool) -> None:
        raise RuntimeError("a static snapshot board sends nothing")


def _options(
    row: int, *, grade: bool = True, metadata: dict[str, Any] | None = None
) -> RequestOptions:
    a, b = 12 + row * 7 % 80, 3 + row * 13 % 90
    return RequestOptions(
        initial_messages=(
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"What is {a} * {b}?"},
        ),
        chat_completions_url=CHAT_URL,
        label=str(a * b),
        metadata=metadata,
        grade=grade,
        agent_timeout_sec=450.0,
        grader_timeout_sec=150.0,
    )


def _result(
    rid: str,
    status: RolloutStatus,
    row: int,
    *,
    reward: float | None = None,
    reply: str | None = None,
    category: RolloutErrorCategory | None = None,
    message: str | None = None,
) -> RolloutResultResponse:
    options = _options(row)
    sample = None
    if status is OK:
        answer = reply if reply is not None else options.label
        sample = RolloutSample(
            messages=[*options.initial_messages, {"role": "assistant", "content": answer}],
            label=options.label,
            reward=reward,
            metrics={"total_tokens": 41.0, "chat_seconds": 0.118},
        )
    return RolloutResultResponse(
        rollout_id=rid, status=status, sample=sample, err_message=message, err_category=category
    )


def _add(
    board: RolloutBoard,
    n: int,
    row: int,
    steps: list[tuple[RolloutStatus, float]],
    *,
    result: RolloutResultResponse | None = None,
    grade: bool = True,
    metadata: dict[str, Any] | None = None,
) -> RolloutRecord:
    rid = rollout_id(n)
    for index, (status, at) in enumerate(steps):
        last = index == len(steps) - 1
        record = board.observe(
            rid,
            status,
            T0 + at,
            row_index=row,
            run_index=0,
            source_row_index=row,  # every row of the dataset: positions and rows agree
            grade=grade,
            result=result if last else None,
        )
    record.options = _options(row, grade=grade, metadata=metadata)
    record.server = SERVER
    record.client = cast(Any, StaticClient())
    assert isinstance(record.observed, RecordedRollout)
    record.observed.polls = len(steps)
    return record


def _call(
    board: RolloutBoard,
    n: int,
    started: float,
    ended: float | None,
    *,
    status: int | None = 200,
    tokens: int | None = 41,  # as the results' sample metrics say
    reply: str | None = None,
    error: str | None = None,
) -> None:
    """One model call of rollout `n`, `started` (and `ended`: None leaves it waiting) that
    many seconds after T0, reported to the board as the gateway reports it."""
    options = _options(n)
    call = ModelCall(
        call_id=board.model_calls + 1,
        rollout_id=rollout_id(n),
        streamed=False,
        requested_model="osmosis-rollout",
        started_at=WALL_T0 + started,
        started_monotonic=T0 + started,
        request_text=str(options.initial_messages[-1]["content"]),
    )
    board.call_started(call)
    if ended is None:
        return
    answered = status == 200
    board.call_ended(
        replace(
            call,
            ended_at=WALL_T0 + ended,
            ended_monotonic=T0 + ended,
            status=status,
            upstream_status=status,
            prompt_tokens=None if tokens is None else tokens - 1,
            completion_tokens=None if tokens is None else 1,
            total_tokens=tokens,
            reply_text=(reply if reply is not None else options.label) if answered else None,
            error=error,
            cost_usd=CALL_COST_USD if answered else None,
        )
    )


def running_board() -> RolloutBoard:
    """A run 95 s in: finished rows of every kind, and rows still in each phase."""
    board = RolloutBoard(stuck_after_sec=60.0)
    board.started_at = T0
    fast = [(Q, 0.0), (R, 0.4), (G, 1.1)]
    for row in range(6):
        start = row * 0.9
        steps = [(s, at + start) for s, at in fast] + [(OK, start + 1.3)]
        _add(board, row, row, steps, result=_result(rollout_id(row), OK, row, reward=1.0))
    # A reply that was graded wrong.
    _add(
        board,
        6,
        6,
        [(Q, 5.0), (R, 5.3), (G, 6.2), (OK, 6.4)],
        result=_result(rollout_id(6), OK, 6, reward=0.0, reply="1087"),
        metadata={"stub": "wrong"},
    )
    # Grading not requested: grading is skipped, "not requested".
    _add(
        board,
        7,
        7,
        [(Q, 5.6), (R, 6.0), (OK, 7.1)],
        result=_result(rollout_id(7), OK, 7, reward=None),
        grade=False,
    )
    # The chat endpoint failed: grading never came ("ended early").
    _add(
        board,
        8,
        8,
        [(Q, 6.1), (R, 6.5), (FAIL, 6.9)],
        result=_result(
            rollout_id(8),
            FAIL,
            8,
            category=RolloutErrorCategory.AGENT_ERROR,
            message="chat endpoint answered HTTP 500: stub error (X-Stub-Behaviour: error)",
        ),
        metadata={"stub": "error"},
    )
    # Running and grading happened between two polls: running is proven by its model call
    # (below), grading is "not observed".
    _add(board, 9, 9, [(Q, 7.0), (OK, 8.2)], result=_result(rollout_id(9), OK, 9, reward=1.0))
    _add(
        board,
        10,
        10,
        [(Q, 7.4), (R, 7.8), (FAIL, 9.3)],
        result=_result(
            rollout_id(10),
            FAIL,
            10,
            category=RolloutErrorCategory.TIMEOUT,
            message="the row's own 1.5s budget ran out",
        ),
        metadata={"stub": "slow:30", "timeout": 1.5},
    )
    # Cancelled from the dashboard while running.
    cancelled = _add(
        board,
        11,
        11,
        [(Q, 8.0), (R, 8.3), (CANCELLED, 41.2)],
        result=_result(rollout_id(11), CANCELLED, 11),
        metadata={"sleep": 120},
    )
    cancelled.cancels += (
        CancelRequest(
            requested_at=T0 + 40.9, disposition="cancelled_running", answered_at=T0 + 41.2
        ),
    )
    for row in range(12, 16):
        start = 9.0 + (row - 12) * 1.7
        steps = [(s, at + start) for s, at in fast] + [(OK, start + 1.4)]
        _add(board, row, row, steps, result=_result(rollout_id(row), OK, row, reward=1.0))
    # Still in flight: one stuck in running for over a minute, then each phase.
    _add(board, 16, 16, [(Q, 12.0), (R, 12.4)], metadata={"sleep": 120})
    _add(board, 17, 17, [(Q, 88.0), (R, 90.5)])
    _add(board, 18, 18, [(Q, 89.0), (R, 90.1), (G, 93.8)])
    untracked = _add(board, 19, 19, [(Q, 70.0), (R, 70.6)], metadata={"sleep": 120})
    board.stop_tracking([untracked.rollout_id])
    troubled = _add(board, 20, 20, [(Q, 91.0), (R, 92.2)])
    assert isinstance(troubled.observed, RecordedRollout)
    troubled.observed.poll_retries = 2
    _add(board, 21, 21, [(Q, 93.5)])
    _add(board, 22, 22, [(Q, 94.1)])
    not_admitted = board.record_not_admitted(
        rollout_id(23),
        "POST /rollout returned 422: label must be a string",
        options=_options(23),
        row_index=23,
        run_index=0,
        source_row_index=23,
        server=SERVER,
    )
    not_admitted.submitted_at = T0 + 60.2  # and so its terminal_at
    _model_calls(board)
    board.take_changes()  # the app starts from a settled board
    return board


def _model_calls(board: RolloutBoard) -> None:
    """The model calls of `running_board`'s rollouts, each inside its running phase."""
    for row in range(6):
        start = row * 0.9
        _call(board, row, start + 0.45, start + 1.0)
    _call(board, 6, 5.35, 6.1, reply="1087")
    _call(board, 7, 6.05, 6.9)
    _call(
        board,
        8,
        6.55,
        6.85,
        status=502,
        tokens=None,
        error='{"error":{"message":"The stub model failed on purpose (injected fault)."}}',
    )
    _call(board, 9, 7.3, 7.9)
    _call(
        board,
        10,
        7.85,
        9.3,
        status=None,
        tokens=None,
        error="abandoned: the rollout left or the gateway stopped",
    )
    for row in range(12, 16):
        start = 9.0 + (row - 12) * 1.7
        _call(board, row, start + 0.45, start + 1.05)
    _call(board, 17, 90.9, None)  # waiting for the model now: "model 4.1s"
    _call(board, 18, 90.2, 93.6)  # answered, then graded: "idle 1.4s"
    _call(board, 20, 92.3, 92.9, tokens=22)  # an agent that calls twice
    _call(board, 20, 93.1, 93.9)


def finished_board(rows: int) -> RolloutBoard:
    """`rows` rollouts that each took a second, none in flight: nothing moves with the clock."""
    board = RolloutBoard()
    board.started_at = T0
    for n in range(rows):
        board.observe(
            f"{n:032x}",
            RolloutStatus.QUEUED,
            T0 + n,
            row_index=n,
            run_index=0,
            source_row_index=n,
        )
        board.observe(f"{n:032x}", RolloutStatus.SUCCESS, T0 + n + 1)
    board.take_changes()
    return board


def running_source() -> StaticSource:
    return StaticSource(running_board(), total=40)


def budget_source() -> StaticSource:
    """`running_board`'s run under a $10 budget whose projection passed it: dispatch paused
    by the budget, $4.12 spent, $12.47 projected."""
    return StaticSource(
        running_board(),
        total=40,
        budget=Spend(
            spent_usd=4.1234,
            session_usd=4.1234,
            projected_usd=12.47,
            budget_usd=10.0,
            state="paused",
        ),
        dispatch_state=DispatchState(paused=True, max_in_flight=4, in_flight=3),
    )


#: `fleet_source`'s servers: `running_board`'s rollouts spread over them in turn.
FLEET = ("http://10.0.0.11:8000", "http://10.0.0.12:8000", "http://10.0.0.13:8000")


def fleet_source() -> StaticSource:
    """`running_board`'s run over three servers: one accepting, one the operator drained
    (it answered some admissions 429), one down after a restart."""
    board = running_board()
    for index, record in enumerate(board):
        record.server = FLEET[index % len(FLEET)]
    return StaticSource(
        board,
        total=40,
        server_states=[
            ServerView(FLEET[0], "accepting", capacity=8, health_ms=3.2),
            ServerView(FLEET[1], "drained", capacity=8, busy=4, health_ms=41.0),
            ServerView(FLEET[2], "down", restarts=1, detail="ConnectError", capacity=8),
        ],
    )


RUN_FOLDER = ".osmosis/evals/multiply-20260301-120000"
RERUN = f"osmosis-tui eval --server {SERVER}"


def ended_source() -> StaticSource:
    """`running_board`'s run, stopped there because its only server went away: what was in
    flight is no longer watched, the server is shown as last seen, the banner says why."""
    board = running_board()
    board.stop_tracking([record.rollout_id for record in board if record.in_flight])
    board.take_changes()
    name = "multiply-20260301-120000"
    return StaticSource(
        board,
        total=40,
        finished=True,
        can_send=False,
        server_states=[ServerView(SERVER, "down", watched=False)],
        ending=RunEnding(
            f"Run {name} stopped before every work item finished: {RUN_FOLDER}",
            problem=f"every rollout server is down and none came back within 10 s ({SERVER}: "
            "ConnectError: Cannot connect to host 127.0.0.1:8430)",
            next_steps=(
                f"Resume the pending work items: {RERUN} --name {name}",
                f"Run the failures again: {RERUN} --name {name} --retry-failed",
            ),
        ),
    )


def _reported(board: RolloutBoard, n: int, steps: list[tuple[RolloutStatus, float]]) -> None:
    """Ownership events of rollout `n` (PROTOCOL.md §8.1), as the board gets them."""
    for sequence, (status, at) in enumerate(steps):
        board.server_mark(
            rollout_id(n),
            PhaseMark(
                status,
                T0 + at,
                "server",
                server_time=1_796_112_000.0 + at,
                event_sequence=100 + sequence,
                server_id="rollout-host",
            ),
        )


def server_truth_source() -> StaticSource:
    """Rollouts of servers that report their phases (issue 13), beside one that does not: an
    official server's rollout the polls saw only queued then finished, every phase reported
    by the server; one whose grading report never came (◐: a poll saw it); one running by
    the server's word while the poll still says queued; one of a server that publishes
    nothing, whose running and grading happened unseen (◌)."""
    board = RolloutBoard(stuck_after_sec=60.0)
    board.started_at = T0
    _add(board, 0, 0, [(Q, 1.0), (OK, 9.2)], result=_result(rollout_id(0), OK, 0, reward=1.0))
    _reported(board, 0, [(Q, 0.98), (R, 0.99), (G, 8.7), (OK, 9.1)])
    _add(
        board,
        1,
        1,
        [(Q, 2.0), (G, 9.9), (OK, 10.1)],
        result=_result(rollout_id(1), OK, 1, reward=1.0),
    )
    _reported(board, 1, [(Q, 1.98), (R, 1.99), (OK, 10.05)])
    _add(board, 2, 2, [(Q, 80.0)])
    _reported(board, 2, [(Q, 79.99), (R, 80.0)])
    _add(board, 3, 3, [(Q, 3.0), (OK, 12.0)], result=_result(rollout_id(3), OK, 3, reward=1.0))
    board.take_changes()
    return StaticSource(board, total=4)


def waterfall_shot_source() -> StaticSource:
    """The waterfall's states (`timing_states.py`, which builds on this module)."""
    from tests.tui.timing_states import waterfall_source

    return waterfall_source()


THROUGHPUT = [3, 5, 4, 6, 5, 2, 1, 3, 4, 2, 1, 1, 2, 1, 1, 0, 1, 0, 2]


def build_app(source: StaticSource | None = None, *, theme: str = THEME) -> DashboardApp:
    """The dashboard over a static source: frozen clock, fixed theme, no animations."""
    app = create_app(source or running_source(), clock=lambda: NOW, start_work=False)
    app.theme = theme
    app.animation_level = "none"
    return app


def prepare_view(*, cursor_row: int | None = None) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """A `run_before` for `snap_compare`: a throughput history, and the cursor on a row."""

    async def run_before(pilot: Pilot[Any]) -> None:
        app = cast(DashboardApp, pilot.app)
        strip = app.query_one(SummaryStrip)
        done = app.source.progress().done - sum(THROUGHPUT)
        for finished in THROUGHPUT:
            done += finished
            strip.sample_throughput(done)
        if cursor_row is not None:
            app.table.move_cursor_to(rollout_id(cursor_row))
        app.update_summary()
        await pilot.pause()

    return run_before


@dataclass(frozen=True)
class Shot:
    """One snapshot test (and README screenshot): which keys, on which row, at what size."""

    name: str
    press: tuple[str, ...] = ()
    cursor_row: int | None = None
    size: tuple[int, int] = SIZE
    source: Callable[[], StaticSource] = running_source
    theme: str = THEME
    #: Drawn into screenshots/ for the README too (else a snapshot test only).
    screenshot: bool = True


#: The sizes the views of one rollout and the sorted table are pinned at.
K9S_SIZES = {"large": (160, 45), "narrow": (100, 30), "small": (80, 24)}

SHOTS = (
    Shot("running"),
    Shot("details-skipped-grading", press=("enter",), cursor_row=7),  # grade=false
    Shot("cancel-confirm", press=("c",), cursor_row=16),  # the stuck one
    Shot("failures", press=("5",)),
    Shot("help", press=("question_mark",)),
    Shot("quit", press=("q",)),
    Shot("narrow", size=(100, 30)),
    Shot("ended", source=ended_source),
    Shot("server-truth", press=("enter",), cursor_row=0, source=server_truth_source),
    Shot(
        "server-truth-80x24",
        press=("enter",),
        cursor_row=1,
        size=(80, 24),
        source=server_truth_source,
    ),
    Shot("small", size=(80, 24)),
    Shot("budget", size=(160, 45), source=budget_source, screenshot=False),
    Shot("budget-small", size=(80, 24), source=budget_source, screenshot=False),
    # The details beside the table at 80 columns: every phase track whole.
    Shot("small-details", press=("enter",), cursor_row=16, size=(80, 24), screenshot=False),
    # The event log opened with the cursor on the last row: the table scrolls to keep it.
    Shot("small-log", press=("end", "l"), size=(80, 24), screenshot=False),
    # The help fits and scrolls; the dialogs fit from 60 columns.
    Shot("small-help", press=("question_mark",), size=(80, 24), screenshot=False),
    Shot("small-help-end", press=("question_mark", "end"), size=(80, 24), screenshot=False),
    Shot("quit-60", press=("q",), size=(60, 24), screenshot=False),
    Shot("cancel-confirm-60", press=("c",), cursor_row=16, size=(60, 24), screenshot=False),
    # A light theme: the muted columns (try, id, total) readable, not white on white.
    Shot("light", size=(100, 30), theme="textual-light", screenshot=False),
    Shot("large", size=(160, 45), screenshot=False),
    # Sorted by time in phase (the stuck one first, its header marked), rows tinted by state.
    *(
        Shot(f"sorted-{name}", press=("T",), size=size, screenshot=name == "large")
        for name, size in K9S_SIZES.items()
    ),
    Shot(
        "sorted-light",
        press=("W", "W", "v", "f"),
        size=(100, 30),
        theme="textual-light",
        screenshot=False,
    ),
    # The full view of the failure whose model call failed, in each of its tabs.
    *(
        Shot(
            f"rollout-view-{name}",
            press=("d",),
            cursor_row=8,
            size=size,
            screenshot=name == "narrow",
        )
        for name, size in K9S_SIZES.items()
    ),
    Shot("rollout-view-calls", press=("d", "2"), cursor_row=8, size=(100, 30), screenshot=False),
    Shot(
        "rollout-view-transcript", press=("d", "3"), cursor_row=0, size=(100, 30), screenshot=False
    ),
    Shot("rollout-view-json", press=("d", "4"), cursor_row=8, size=(80, 24), screenshot=False),
    # Where the time went (issue 26): a rollout that waited 39 s on the model; the latency
    # histogram of the running board with a bin under the cursor.
    Shot(
        "waterfall", press=("d", "5"), cursor_row=30, size=(100, 30), source=waterfall_shot_source
    ),
    Shot("distributions", press=("h", "right", "right", "right", "right", "down"), size=(100, 30)),
)


def write_screenshots(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for shot in (shot for shot in SHOTS if shot.screenshot):
        # The function pytest-textual-snapshot draws its snapshots with: the same pictures.
        svg = take_svg_screenshot(
            app=build_app(shot.source(), theme=shot.theme),
            press=shot.press,
            terminal_size=shot.size,
            run_before=prepare_view(cursor_row=shot.cursor_row),
        )
        path = folder / f"{shot.name}.svg"
        # Without the random per-export id: the same state gives the same file, byte for byte.
        path.write_text(normalize_svg(svg))
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description="Write the dashboard screenshots (SVG).")
    parser.add_argument("folder", type=Path, nargs="?", default=Path("screenshots"))
    folder = parser.parse_args().folder
    # The pictures must not depend on the terminal they were made from (as in the tests),
    # nor on the theme and sort the developer's dashboard remembers.
    for name in ("NO_COLOR", "TEXTUAL_THEME"):
        os.environ.pop(name, None)
    with tempfile.TemporaryDirectory() as config_home:
        os.environ["XDG_CONFIG_HOME"] = config_home
        for path in write_screenshots(folder):
            print(path)


if __name__ == "__main__":
    main()
