"""Work spread over several rollout servers (EVAL.md §7): by free capacity, and over servers
that advertise none by what is in flight on each, never all of it to the first."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import cast

import httpx
import pytest

from core.board import RolloutBoard
from core.client import RolloutClient
from core.errors import RolloutProtocolError
from core.eval.runner import EvalRunner, RunSettings
from core.eval.servers.pool import RolloutServerSlot, ServerPool
from core.handle import RolloutHandle
from core.rollout_record import RequestOptions
from server_stub import LocalBackend, create_rollout_server
from server_stub.backend import ExecutionOutcome, ExecutionRequest
from server_stub.demo import ExactMatchGrader, MultiplyWorkflow
from tests.eval.runs.files import multiply_rows
from tests.reliability.in_process import chat_endpoint, rollout_server, run_session


class SaysNoCapacity(LocalBackend):
    """The demo rollout behind a /health without capacity fields, as the official backend's
    default health() is; counts what it ran."""

    def __init__(self) -> None:
        super().__init__(workflow=MultiplyWorkflow, grader=ExactMatchGrader)
        self.executed = 0

    def health(self) -> dict[str, object]:
        return {"status": "ok"}

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        self.executed += 1
        return await super().execute(request)


async def test_servers_without_capacity_share_the_work(tmp_path: Path) -> None:
    backends = [SaysNoCapacity(), SaysNoCapacity()]
    apps = [create_rollout_server(backend=b, configure_logging=False) for b in backends]
    rows = multiply_rows(12, metadata={"stub": "slow:0.2"})
    async with (
        chat_endpoint() as chat_url,
        rollout_server(apps[0]) as first,
        rollout_server(apps[1]) as second,
    ):
        run = await run_session(
            tmp_path, rows, servers=(first, second), chat_url=chat_url, max_in_flight=4
        )
    assert run.summary.status == "complete", run.summary.problem
    assert run.session.pool is not None
    assert [slot.capacity for slot in run.session.pool.slots] == [None, None]
    counts = [backend.executed for backend in backends]
    assert sum(counts) == 12
    assert min(counts) >= 4, f"one server got most of the work: {counts}"


async def test_the_next_rollout_goes_to_the_server_with_the_most_room() -> None:
    pool = ServerPool.connect(["http://a", "http://b", "http://c"], api_key=None)
    try:
        a, b, c = pool.slots
        a.capacity = 2  # b and c advertise none
        order = [await pool.acquire() for _ in range(7)]
        pool.release(c)
        pool.release(c)
        after = await pool.acquire()
    finally:
        await pool.aclose()
    # b and c count as having the largest capacity advertised here (a's 2): the three share
    # the work by what is in flight on each until a is full, then b and c take the rest.
    assert order == [a, b, c, a, b, c, b]
    assert after is c, "the least loaded one"


async def test_a_health_read_we_have_no_descriptor_for_does_not_mark_the_server_down() -> None:
    def no_descriptor_left(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("cannot connect", request=request) from OSError(
            errno.EMFILE, "Too many open files"
        )

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("cannot connect", request=request) from OSError(
            errno.ECONNREFUSED, "Connection refused"
        )

    cases = (
        (no_descriptor_left, "accepting", "not read: this process is out of file descriptors"),
        (refused, "down", "ConnectError"),
    )
    for handler, state, error in cases:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            # The pool's own clients make their connections: this one is given the handler's.
            slot = RolloutServerSlot(
                url="http://a", client=RolloutClient(url="http://a", http_client=http)
            )
            pool = ServerPool([slot])
            await pool.probe(slot, after_failure=True)  # a second failure in a row
            assert slot.state == state, slot.last_error
            assert error in (slot.last_error or "")


class Refuses:
    """A rollout client that only remembers how it was asked to poll."""

    def __init__(self) -> None:
        self.asked: list[bool] = []

    async def run_rollout_async(self, *_args: object, **kwargs: object) -> RolloutHandle:
        self.asked.append(bool(kwargs["observe_every_status"]))
        raise RolloutProtocolError("refused for the test", status_code=400)


async def test_a_server_whose_events_arrive_is_polled_without_asking_for_every_status() -> None:
    # EVAL.md §6: once a server's ownership events reach the run they tell every status, so
    # its polls need not ask for each one (the request that only existed to see `running`).
    refuses = Refuses()
    slot = RolloutServerSlot(url="http://a", client=cast(RolloutClient, refuses))
    pool = ServerPool([slot])
    runner = EvalRunner(
        items=[],
        rows={},
        pool=pool,
        board=RolloutBoard(),
        settings=RunSettings(chat_completions_url=lambda rollout_id: f"http://gw/{rollout_id}"),
        on_result=lambda _result: None,
    )
    options = RequestOptions(
        initial_messages=({"role": "user", "content": "hi"},), chat_completions_url=""
    )
    for heard in ("http://elsewhere", "http://a"):
        with pytest.raises(RolloutProtocolError):
            await runner.submit(options)
        pool.heard_from(heard)
    with pytest.raises(RolloutProtocolError):
        await runner.submit(options)
    assert refuses.asked == [True, True, False]
    assert slot.publishes_events and slot.in_flight == 0
