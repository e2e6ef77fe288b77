"""RolloutHandle: waiters, local cancel, observed transitions and skipped phases (§6.2, §6.3)."""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import pytest

from core import RolloutClient, RolloutHandle, RolloutStatus, Transition
from core.handle import SkipReason
from core.types import OBSERVED_STATUS_HEADER
from tests.conftest import Serve
from tests.core.test_client import (
    CHAT_URL,
    PROMPT,
    Answer,
    Fake,
    FaultyTransport,
    admit_echo,
    fake_server,
    make_handle,
    real_server,
    result_json,
)

Q, R, G = RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.GRADING
S, F, C = RolloutStatus.SUCCESS, RolloutStatus.FAILURE, RolloutStatus.CANCELLED


def statuses(handle: RolloutHandle) -> list[RolloutStatus]:
    return [transition.status for transition in handle.transitions]


# -- waiting ----------------------------------------------------------------------------------


async def test_concurrent_waiters_share_one_result_when_grading_is_skipped(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        handle = await client.run_rollout_async(
            PROMPT, CHAT_URL, "many", metadata={"sleep": 0.3}, grade=False
        )
        first, second, completion, running, grading = await asyncio.gather(
            handle,
            handle,
            handle.wait_for_completion(),
            handle.wait_for_running(),
            handle.wait_for_grading(),
        )
        again = await handle
    assert first is second is completion is again is handle.latest_result
    assert first.status is S
    assert first.sample is not None
    assert first.sample.reward is None  # not graded
    assert running in (R, S)
    # Grading never happens, so the grading waiter is released by the terminal status.
    assert grading is S
    assert handle.skipped_phases().get(G) == "not_requested"
    assert handle.done() and handle.polling_finished
    assert handle.cancel() is False  # already done


async def test_wait_for_running_returns_the_status_it_saw(serve: Serve) -> None:
    fake = Fake().on("POST", "/rollout", admit_echo)
    fake.on(
        "GET",
        "/rollout/*",
        Answer(200, result_json("g", "grading"), delay=0.1),
        Answer(200, result_json("g", "success"), delay=0.1),
    )
    async with fake_server(serve, fake) as url, RolloutClient(url=url) as client:
        handle = await client.run_rollout_async(PROMPT, CHAT_URL, "g")
        running = await handle.wait_for_running()
        grading = await handle.wait_for_grading()
        assert handle.status in (G, S)
        result = await handle
        assert await handle.wait_for_running() is S  # already past: returns at once
    assert running is G
    assert grading is G
    assert result.status is S
    assert statuses(handle) == [Q, G, S]
    assert handle.skipped_phases() == {R: "not_observed"}
    assert handle.polls == 2


async def test_queued_straight_to_success(serve: Serve) -> None:
    # Everything happened between two polls: the server was seen queued, then finished.
    fake = Fake().on("POST", "/rollout", admit_echo)
    for rollout_id in ("qs-1", "qs-2"):
        fake.on(
            "GET",
            f"/rollout/{rollout_id}/result",
            Answer(200, result_json(rollout_id, "queued"), delay=0.05),
            Answer(200, result_json(rollout_id, "success"), delay=0.05),
        )
    async with fake_server(serve, fake) as url, RolloutClient(url=url) as client:
        graded = await client.run_rollout_async(PROMPT, CHAT_URL, "qs-1")
        ungraded = await client.run_rollout_async(PROMPT, CHAT_URL, "qs-2", grade=False)
        await asyncio.gather(graded, ungraded)
    for handle in (graded, ungraded):
        assert statuses(handle) == [Q, S]
        assert handle.polls == 2
    assert graded.skipped_phases() == {R: "not_observed", G: "not_observed"}
    assert ungraded.skipped_phases() == {R: "not_observed", G: "not_requested"}


async def test_status_changed_is_notified_on_every_observation(serve: Serve) -> None:
    fake = Fake().on("POST", "/rollout", admit_echo)
    fake.on(
        "GET",
        "/rollout/*",
        Answer(200, result_json("n", "running"), delay=0.1),
        Answer(200, result_json("n", "running"), delay=0.1),
        Answer(200, result_json("n", "success"), delay=0.1),
    )
    seen: list[tuple[RolloutStatus, bool]] = []
    async with fake_server(serve, fake) as url, RolloutClient(url=url) as client:
        handle = await client.run_rollout_async(PROMPT, CHAT_URL, "n")
        condition = handle.status_changed
        while not handle.polling_finished:
            async with condition:
                await condition.wait()
                seen.append((handle.status, handle.polling_finished))
    # Each observation notifies, a repeated status too. The terminal observation and the end
    # of polling happen in one step of the polling task, so a waiter wakes once for both.
    assert seen == [(R, False), (R, False), (S, True)]
    assert statuses(handle) == [Q, R, S]
    assert handle.polls == 3


# -- local cancel -----------------------------------------------------------------------------


async def test_cancel_before_polling_starts_sends_nothing_and_wakes_waiters(serve: Serve) -> None:
    ended: list[bool] = []
    async with real_server(serve) as srv, srv.client() as client:
        handle = await client.run_rollout_async(
            PROMPT,
            CHAT_URL,
            "quiet",
            label="42",
            metadata={"sleep": 0.2},
            on_change=lambda h: ended.append(h.polling_finished),
        )
        running = asyncio.create_task(handle.wait_for_running())
        grading = asyncio.create_task(handle.wait_for_grading())
        assert handle.cancel() is True  # before the polling task took its first step
        with pytest.raises(asyncio.CancelledError):
            await handle
        # The official handle leaves these hanging; ours wakes them with the same outcome.
        done, _ = await asyncio.wait({running, grading}, timeout=2)
        assert done == {running, grading}
        assert running.cancelled() and grading.cancelled()
        with pytest.raises(asyncio.CancelledError):
            await handle.wait_for_completion()
        with pytest.raises(asyncio.CancelledError):
            await handle.wait_for_running()
        assert handle.done() and handle.polling_finished
        # The server rollout is not told anything and runs to its end regardless.
        await client.wait_idle(timeout_sec=5, poll_interval_sec=0.05)
    assert srv.recorder.count("GET", suffix="/result") == 0
    assert srv.recorder.count("POST", "/rollout/cancel") == 0
    assert handle.status is Q and handle.latest_result is None
    assert handle.skipped_phases() == {}
    assert ended == [True]


async def test_cancel_while_polling_is_local_only(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        handle = await client.run_rollout_async(
            PROMPT, CHAT_URL, "local", label="42", metadata={"sleep": 5}
        )
        assert await handle.wait_for_running() is R
        waiter = asyncio.create_task(handle.wait_for_grading())
        await asyncio.sleep(0.05)
        gets_before = srv.recorder.count("GET", suffix="/result")
        assert handle.cancel() is True
        with pytest.raises(asyncio.CancelledError):
            await handle
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await asyncio.sleep(0.3)
        gets_after = srv.recorder.count("GET", suffix="/result")
        still_active = srv.active_rollouts
        cancels = srv.recorder.count("POST", "/rollout/cancel")
        await client.cancel_rollout("local")  # only to end the test quickly
        await client.wait_idle(timeout_sec=5, poll_interval_sec=0.05)
    assert gets_after == gets_before
    assert cancels == 0
    assert still_active == 1  # the server keeps executing it
    assert handle.status is R and handle.polling_finished
    assert handle.last_poll_error is None


# -- transitions and skipped phases on the real server -------------------------------------------


async def test_cancel_on_the_server_is_observed_as_cancelled(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        handle = await client.run_rollout_async(
            PROMPT, CHAT_URL, "srv-cancel", label="42", metadata={"sleep": 10}
        )
        await handle.wait_for_running()
        answer = await client.cancel_rollout(handle.rollout_id)
        result = await handle
    assert answer.dispositions == {"srv-cancel": "cancelled_running"}
    assert (result.status, result.err_message) == (C, "cancelled")
    assert statuses(handle) == [Q, R, C]
    assert handle.skipped_phases() == {G: "ended_early"}


async def test_failure_while_running(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        handle = await client.run_rollout_async(
            PROMPT,
            CHAT_URL,
            "boom",
            label="42",
            metadata={"sleep": 0.3, "raise": "value", "message": "bad answer"},
        )
        assert await handle.wait_for_grading() is F
        result = await handle
    assert (result.status, result.err_message, result.err_category) == (
        F,
        "bad answer",
        "validation_error",
    )
    assert statuses(handle) == [Q, R, F]
    assert handle.skipped_phases() == {G: "ended_early"}


async def test_graded_rollout_observes_each_phase(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        handle = await client.run_rollout_async(
            PROMPT, CHAT_URL, "phases", label="42", metadata={"sleep": 0.3, "grade_sleep": 0.3}
        )
        assert await handle.wait_for_grading() is G
        result = await handle
    assert result.sample is not None and result.sample.reward == 1.0
    assert statuses(handle) == [Q, R, G, S]
    assert handle.skipped_phases() == {}
    times = [transition.at for transition in handle.transitions]
    assert times == sorted(times)
    assert handle.polls == srv.recorder.count("GET", suffix="/result")


async def test_fast_rollout_skips_are_explained(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        graded = await client.run_rollout_async(PROMPT, CHAT_URL, "fast-1", label="42")
        ungraded = await client.run_rollout_async(PROMPT, CHAT_URL, "fast-2", grade=False)
        await asyncio.gather(graded, ungraded)
    # Whatever the polls happened to see, every phase is either observed or explained.
    for handle in (graded, ungraded):
        seen = set(statuses(handle))
        skipped = handle.skipped_phases()
        assert seen | set(skipped) >= {Q, R, G}
        assert not seen & set(skipped)
    assert all(reason == "not_observed" for reason in graded.skipped_phases().values())
    assert ungraded.skipped_phases()[G] == "not_requested"


async def test_lease_expiry_is_observed_as_a_failure(serve: Serve) -> None:
    transport = FaultyTransport()
    async with (
        real_server(serve, wait=0.2, lease=0.5) as srv,
        httpx.AsyncClient(transport=transport) as http,
    ):
        client = RolloutClient(url=srv.url, http_client=http)
        handle = await client.run_rollout_async(
            PROMPT, CHAT_URL, "expire", label="42", metadata={"sleep": 10}
        )
        await handle.wait_for_running()
        # The next GET but one leaves 0.8 s late: longer than the 0.5 s lease.
        transport.faults = [None, 0.8]
        result = await handle
        await client.wait_idle(timeout_sec=5, poll_interval_sec=0.05)
    assert (result.status, result.err_message, result.err_category) == (
        F,
        "polling lease expired",
        "lease_expired",
    )
    assert statuses(handle) == [Q, R, F]
    assert handle.skipped_phases() == {G: "ended_early"}


# -- skipped_phases as a table ------------------------------------------------------------------


CASES: list[tuple[list[RolloutStatus], bool, dict[RolloutStatus, SkipReason]]] = [
    ([Q, R, G, S], True, {}),
    ([Q, S], True, {R: "not_observed", G: "not_observed"}),
    ([Q, S], False, {R: "not_observed", G: "not_requested"}),
    ([Q, R, S], False, {G: "not_requested"}),
    ([Q, R, F], True, {G: "ended_early"}),
    ([Q, F], True, {R: "ended_early", G: "ended_early"}),
    ([Q, C], False, {R: "ended_early", G: "not_requested"}),
    ([Q, G, C], True, {R: "not_observed"}),
    ([Q, G, S], True, {R: "not_observed"}),
    ([R, S], True, {Q: "not_observed", G: "not_observed"}),
    ([Q, RolloutStatus.UNKNOWN, S], True, {R: "not_observed", G: "not_observed"}),
    ([Q], True, {}),
    ([Q, R], True, {}),
    ([Q], False, {G: "not_requested"}),
]


@pytest.mark.parametrize(("seen", "grade", "expected"), CASES)
async def test_skipped_phases_reasons(
    seen: list[RolloutStatus], grade: bool, expected: dict[RolloutStatus, SkipReason]
) -> None:
    async with RolloutClient(url="http://127.0.0.1:9") as client:
        handle = make_handle(client, grade=grade)
        handle.cancel()
        with pytest.raises(asyncio.CancelledError):
            await handle
        # Replay an observed history onto the stopped handle.
        handle.transitions = [Transition(status, float(i)) for i, status in enumerate(seen)]
        handle.status = seen[-1]
        assert handle.skipped_phases() == expected


# -- additions: on_change, counters, lease ------------------------------------------------------


async def test_on_change_fires_on_changes_and_once_at_the_end(serve: Serve) -> None:
    calls: list[tuple[RolloutStatus, bool]] = []
    async with real_server(serve) as srv, srv.client() as client:
        handle = await client.run_rollout_async(
            PROMPT,
            CHAT_URL,
            "cb",
            label="42",
            metadata={"sleep": 0.3},
            on_change=lambda h: calls.append((h.status, h.polling_finished)),
        )
        await handle
        await asyncio.sleep(0)  # the end-of-polling call runs as a task done-callback
    changes = statuses(handle)[1:]
    assert calls == [*((status, False) for status in changes), (S, True)]


async def test_a_failing_on_change_does_not_stop_polling(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    def explode(_handle: RolloutHandle) -> None:
        raise RuntimeError("display bug")

    caplog.set_level(logging.ERROR, logger="core.handle")
    async with real_server(serve) as srv, srv.client() as client:
        handle = await client.run_rollout_async(
            PROMPT, CHAT_URL, "cb-bad", label="42", on_change=explode
        )
        result = await handle
        await asyncio.sleep(0)
    assert result.status is S
    assert "on_change callback failed for rollout cb-bad" in caplog.text


async def test_lease_is_renewed_from_the_start_of_each_successful_get(serve: Serve) -> None:
    transport = FaultyTransport()
    async with (
        real_server(serve, wait=0.2, lease=2.0) as srv,
        httpx.AsyncClient(transport=transport) as http,
    ):
        client = RolloutClient(url=srv.url, http_client=http)
        before = time.monotonic()
        deadlines: list[float] = []
        handle = await client.run_rollout_async(
            PROMPT,
            CHAT_URL,
            "renew",
            label="42",
            metadata={"sleep": 0.5},
            on_change=lambda h: deadlines.append(h.lease.deadline),
        )
        initial = handle.lease.deadline
        await handle
    assert before + 2.0 <= initial <= transport.result_gets[0][0] + 2.0
    starts = [at for at, _ in transport.result_gets]
    assert len(starts) == handle.polls >= 2
    renewed_from = handle.lease.deadline - 2.0
    # Measured just before the last GET entered the transport, after the previous one ended.
    assert starts[-2] < renewed_from <= starts[-1]
    assert deadlines == sorted(deadlines) and deadlines[0] > initial
    assert {token for _, token in transport.result_gets} == {transport.result_gets[0][1]}
    assert handle.poll_retries == 0 and handle.last_poll_error is None


async def test_default_lease_deadline_and_repr() -> None:
    async with RolloutClient(url="http://127.0.0.1:9") as client:
        before = time.monotonic()
        handle = make_handle(client, "r-default", lease=30.0)
        after = time.monotonic()
        explicit = make_handle(client, "r-explicit", lease_deadline=before + 5)
        for h in (handle, explicit):
            h.cancel()
        await asyncio.gather(handle, explicit, return_exceptions=True)
    assert before + 30.0 <= handle.lease.deadline <= after + 30.0
    assert explicit.lease.deadline == before + 5
    assert explicit.lease.length_sec == 30.0
    assert repr(handle) == "<RolloutHandle 'r-default' queued>"
    assert handle.transitions[0].status is Q
    assert before <= handle.transitions[0].at <= after


def test_a_handle_needs_a_running_loop() -> None:
    client = RolloutClient(url="http://127.0.0.1:9")
    with pytest.raises(RuntimeError):
        make_handle(client)


class HeaderRecorder(httpx.AsyncBaseTransport):
    """Real HTTP, remembering the observed-status header of every result GET."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.observed: list[str | None] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path.endswith("/result"):
            self.observed.append(request.headers.get(OBSERVED_STATUS_HEADER))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("every", [True, False])
async def test_polls_say_what_they_saw_unless_told_not_to(serve: Serve, every: bool) -> None:
    transport = HeaderRecorder()
    async with (
        real_server(serve, wait=0.2) as srv,
        httpx.AsyncClient(transport=transport) as http,
    ):
        client = RolloutClient(url=srv.url, http_client=http)
        handle = await client.run_rollout_async(
            PROMPT,
            CHAT_URL,
            f"observe-{every}",
            label="42",
            metadata={"sleep": 0.3},
            observe_every_status=every,
        )
        result = await handle
    assert result.status is S
    assert transport.observed, "at least one poll"
    if every:
        assert transport.observed[0] == "queued"
        assert all(value in {s.value for s in RolloutStatus} for value in transport.observed)
    else:
        # As the official client polls: each poll waits for the next change.
        assert transport.observed == [None] * len(transport.observed)
