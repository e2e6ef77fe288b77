"""A real TCP proxy between client and server that cuts, drops, delays or swallows connections
(issue 7 §1): the client retries inside the lease, then fails with a clear transport error.

tests/core/test_client_faults.py proves the retry schedule with injected exceptions; here the
same rules are checked against real sockets, and an eval is run through a flaky network.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from core import RolloutClient, RolloutHandle, RolloutStatus
from core import handle as handle_module
from core.errors import describe_error
from server_stub import LocalBackend, create_rollout_server
from tests.eval.runs.files import multiply_rows, read_jsonl
from tests.reliability.in_process import demo_app, rollout_server, run_session
from tests.reliability.proxy import proxy_to
from tests.server.plugins import Echo, ExactMatch

PROMPT = [{"role": "user", "content": "6*7?"}]
CHAT_URL = "http://127.0.0.1:9/v1"  # Echo never calls it


def echo_app(*, wait: float = 0.2, lease: float = 30.0) -> object:
    # A retry is only sent if it fits in the lease: 0.5 s + (wait + the 10 s read grace).
    return create_rollout_server(
        backend=LocalBackend(workflow=Echo, grader=ExactMatch),
        configure_logging=False,
        result_wait_timeout_sec=wait,
        polling_lease_timeout_sec=lease,
    )


async def start(client: RolloutClient, rollout_id: str, sleep: float) -> RolloutHandle:
    handle = await client.run_rollout_async(
        PROMPT, CHAT_URL, rollout_id, label="42", metadata={"sleep": sleep}
    )
    await handle.wait_for_running()
    return handle


async def test_cut_connections_are_retried_and_the_rollout_completes() -> None:
    async with (
        rollout_server(echo_app()) as url,
        proxy_to(url) as proxy,
        RolloutClient(url=proxy.url) as client,
    ):
        handle = await start(client, "cut", sleep=2.0)
        for _ in range(3):
            await asyncio.sleep(0.4)
            proxy.cut()  # the long-poll in flight dies mid-request
        result = await asyncio.wait_for(handle, 10)
    assert result.status is RolloutStatus.SUCCESS
    assert result.sample is not None and result.sample.reward == 1.0
    assert handle.poll_retries >= 2  # a cut between two polls may only kill an idle connection
    assert handle.last_poll_error is None


async def test_a_slow_network_only_slows_things_down() -> None:
    async with rollout_server(echo_app()) as url, proxy_to(url) as proxy:
        proxy.delay = 0.05  # every chunk, each way
        async with RolloutClient(url=proxy.url) as client:
            handles = [await start(client, f"slow-{n}", sleep=0.1) for n in range(4)]
            results = await asyncio.wait_for(asyncio.gather(*handles), 20)
    assert [r.status for r in results] == [RolloutStatus.SUCCESS] * 4
    assert all(h.poll_retries == 0 for h in handles)


async def test_a_proxy_dropping_every_connection_ends_polling_with_a_clear_error() -> None:
    async with rollout_server(echo_app()) as url, proxy_to(url) as proxy:
        async with RolloutClient(url=proxy.url) as client:
            handle = await start(client, "dropped", sleep=30)
            proxy.mode = "drop"  # accepted, then closed: a load balancer with no backend
            proxy.cut()
            started = time.monotonic()
            # A reset or a close before any answer: ReadError or RemoteProtocolError.
            with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)) as caught:
                await asyncio.wait_for(handle, 10)
            elapsed = time.monotonic() - started
        await client_cancel(url, "dropped")
    assert handle.poll_retries == 2  # 0.1 s then 0.5 s, then the error is raised
    assert 0.6 <= elapsed < 5
    assert describe_error(caught.value).startswith(f"{type(caught.value).__name__}: ")
    assert handle.last_poll_error == describe_error(caught.value)


async def test_a_swallowed_poll_is_retried_inside_the_lease_then_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each GET may take 0.2 s (long-poll) + 0.3 s (grace); the lease is 3 s.
    monkeypatch.setattr(handle_module, "RESULT_READ_GRACE_SEC", 0.3)
    async with rollout_server(echo_app(wait=0.2, lease=3.0)) as url, proxy_to(url) as proxy:
        async with RolloutClient(url=proxy.url) as client:
            handle = await start(client, "blackholed", sleep=30)
            proxy.mode = "blackhole"  # accepted and read, never answered
            proxy.cut()
            with pytest.raises(httpx.ReadTimeout):
                await asyncio.wait_for(handle, 10)
            finished = time.monotonic()
        await client_cancel(url, "blackholed")
    # Three attempts (0.5 s each, 0.1 s and 0.5 s apart), all before the lease ran out.
    assert handle.poll_retries == 2
    assert finished <= handle.lease.deadline
    assert proxy.accepted >= 3


async def client_cancel(url: str, rollout_id: str) -> None:
    """Frees the server of a rollout a test left running (directly, not through the proxy)."""
    async with RolloutClient(url=url) as client:
        await client.cancel_rollout(rollout_id)


async def test_an_eval_through_a_flaky_network_finishes_every_item_once(tmp_path: Path) -> None:
    rows = 30
    async with (
        rollout_server(demo_app(max_concurrent=6)) as direct,
        proxy_to(direct) as proxy,
    ):
        events = tmp_path / "out" / "run" / "events.jsonl"

        async def flake() -> int:
            # Long-polls in flight are cut, again and again, but no faster than the retries
            # absorb (three failures of one poll within 0.6 s would exhaust them, and that
            # stops the run, as EVAL.md §4 says). An admission cut mid-request is not retried
            # (it may have been accepted), so quick requests are spared.
            cuts = 0
            while len(read_jsonl(events)) < rows - 6:
                await asyncio.sleep(0.7)
                cuts += proxy.cut(waiting_longer_than=0.15)
            return cuts

        flaking = asyncio.ensure_future(flake())
        run = await run_session(
            tmp_path,
            multiply_rows(rows, metadata={"stub": "slow:0.6"}),
            servers=(proxy.url,),
            chat_url="stub",
            max_in_flight=6,
        )
        cuts = await asyncio.wait_for(flaking, 10)
    assert run.summary.status == "complete", run.summary.problem
    assert cuts >= 2
    journaled = read_jsonl(events)
    assert Counter(e["row_index"] for e in journaled) == Counter(range(rows))
    assert all(e["status"] == "success" for e in journaled)
    retried = sum(record.poll_retries for record in run.session.board)
    assert retried > 0, "the cuts were felt and ridden through"
