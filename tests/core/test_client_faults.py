"""Result polling under faults: retries, their lease bounds, and errors that end polling (§6.3).

Transport faults are injected in front of the real server (`FaultyTransport`); statuses and
bodies server_stub never sends come from scripted fakes. Where the lease arithmetic would need
10 s or more with the official 10 s read grace, the grace is shrunk for the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from core import RolloutClient, RolloutHandle, RolloutProtocolError, RolloutStatus
from core import handle as handle_module
from tests.conftest import Serve
from tests.core.test_client import (
    CHAT_URL,
    PROMPT,
    Answer,
    Fake,
    FaultyTransport,
    fake_server,
    make_handle,
    real_server,
    result_json,
)


@asynccontextmanager
async def faulty_client(url: str, transport: FaultyTransport) -> AsyncIterator[RolloutClient]:
    async with httpx.AsyncClient(transport=transport) as http:
        yield RolloutClient(url=url, http_client=http)


async def outcome(handle: RolloutHandle) -> BaseException:
    """The error polling ended with, checked to be the same object for every kind of waiter."""
    results = await asyncio.gather(
        handle,
        handle,
        handle.wait_for_completion(),
        handle.wait_for_running(),
        handle.wait_for_grading(),
        return_exceptions=True,
    )
    first = results[0]
    assert isinstance(first, BaseException)
    assert all(other is first for other in results)
    assert handle.polling_finished
    return first


# -- transport errors ---------------------------------------------------------------------------


async def test_transient_transport_errors_are_retried_with_the_same_lease(serve: Serve) -> None:
    faults = [httpx.ReadError, httpx.RemoteProtocolError, httpx.ReadTimeout]
    transports = [FaultyTransport(fault, httpx.ConnectError) for fault in faults]

    async def run(transport: FaultyTransport, url: str) -> RolloutHandle:
        async with faulty_client(url, transport) as client:
            rollout_id = f"flaky-{len(transport.faults)}-{id(transport)}"
            handle = await client.run_rollout_async(PROMPT, CHAT_URL, rollout_id, label="42")
            assert (await handle).status is RolloutStatus.SUCCESS
            return handle

    async with real_server(serve, wait=0.2, lease=120.0) as srv:
        handles = await asyncio.gather(*(run(t, srv.url) for t in transports))
    for transport, handle in zip(transports, handles, strict=True):
        assert len(transport.result_gets) == 2 + handle.polls
        assert len({token for _, token in transport.result_gets}) == 1
        # Delays 0.1 s then 0.5 s between the three attempts of the first GET cycle.
        (t0, _), (t1, _), (t2, _) = transport.result_gets[:3]
        assert t1 - t0 >= 0.1 and t2 - t1 >= 0.5
        assert handle.poll_retries == 2
        assert handle.last_poll_error is None  # cleared by the successful poll
    assert srv.recorder.count("GET", suffix="/result") == sum(h.polls for h in handles)


async def test_transport_retries_are_limited_to_two(serve: Serve) -> None:
    transport = FaultyTransport(httpx.ReadError, httpx.ReadError, httpx.ReadError)
    async with (
        real_server(serve, wait=0.2, lease=120.0) as srv,
        faulty_client(srv.url, transport) as client,
    ):
        handle = await client.run_rollout_async(
            PROMPT, CHAT_URL, "down", label="42", metadata={"sleep": 0.2}
        )
        error = await outcome(handle)
        await client.cancel_rollout("down")
    assert error is transport.raised[-1]
    assert len(transport.result_gets) == 3
    assert handle.poll_retries == 2
    assert handle.last_poll_error == "ReadError: injected"
    assert handle.status is RolloutStatus.QUEUED  # the last observed value stays
    assert srv.recorder.count("GET", suffix="/result") == 0


async def test_no_retry_when_it_could_not_finish_inside_the_lease(serve: Serve) -> None:
    # lease 0.5 s < delay + (0.2 s wait + 10 s grace): retrying could only outlive the lease.
    transport = FaultyTransport(httpx.ReadError)
    async with (
        real_server(serve, wait=0.2, lease=0.5) as srv,
        faulty_client(srv.url, transport) as client,
    ):
        handle = await client.run_rollout_async(PROMPT, CHAT_URL, "short", label="42")
        error = await outcome(handle)
    assert isinstance(error, httpx.ReadError)
    assert len(transport.result_gets) == 1
    assert handle.poll_retries == 0


async def test_retries_stay_inside_the_lease(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    # Read timeout 0.2 + 0.3 = 0.5 s, lease 1.0 s.
    monkeypatch.setattr(handle_module, "RESULT_READ_GRACE_SEC", 0.3)
    # The 0.1 s retry fits (0.1 + 0.5 < 1.0) but the 0.5 s one does not (0.1 + 0.5 + 0.5).
    cut = FaultyTransport(httpx.ReadError, httpx.ReadError)
    # The retry is sent but never answered: the whole-request bound (0.5 s) cuts it, and the
    # next retry would not fit in the lease.
    hang = FaultyTransport(httpx.ReadError, "hang")

    async def run(transport: FaultyTransport, url: str, rollout_id: str) -> RolloutHandle:
        async with faulty_client(url, transport) as client:
            handle = await client.run_rollout_async(PROMPT, CHAT_URL, rollout_id, label="42")
            await outcome(handle)
            return handle

    async with real_server(serve, wait=0.2, lease=1.0) as srv:
        cut_handle, hang_handle = await asyncio.gather(
            run(cut, srv.url, "cut"), run(hang, srv.url, "hang")
        )
    assert cut_handle.result_task.exception() is cut.raised[-1]
    assert len(cut.result_gets) == 2
    assert cut_handle.poll_retries == 1
    hung = hang_handle.result_task.exception()
    assert isinstance(hung, httpx.ReadTimeout)
    assert str(hung) == "no complete answer within 0.5 s"
    assert len(hang.result_gets) == 2
    assert hang_handle.poll_retries == 1
    assert srv.recorder.count("GET") == 0


async def test_other_transport_errors_are_not_retried(serve: Serve) -> None:
    faults = [httpx.ConnectTimeout, httpx.WriteTimeout, httpx.PoolTimeout, httpx.LocalProtocolError]
    transports = [FaultyTransport(fault) for fault in faults]

    async def run(transport: FaultyTransport, url: str, rollout_id: str) -> BaseException:
        async with faulty_client(url, transport) as client:
            handle = await client.run_rollout_async(PROMPT, CHAT_URL, rollout_id, label="42")
            error = await outcome(handle)
            assert handle.last_poll_error == f"{type(error).__name__}: injected"
            return error

    async with real_server(serve) as srv:
        errors = await asyncio.gather(
            *(run(t, srv.url, f.__name__) for t, f in zip(transports, faults, strict=True))
        )
    for fault, transport, error in zip(faults, transports, errors, strict=True):
        assert type(error) is fault
        assert len(transport.result_gets) == 1


async def test_a_dropped_connection_is_retried() -> None:
    """A peer that closes without answering: httpx reports RemoteProtocolError."""
    connections = 0

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(drop, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with RolloutClient(url=f"http://127.0.0.1:{port}") as client:
            handle = make_handle(client, "dropped")
            error = await outcome(handle)
    finally:
        server.close()
        await server.wait_closed()
    assert isinstance(error, httpx.RemoteProtocolError)
    assert connections == 3
    assert handle.poll_retries == 2


# -- gateway statuses -----------------------------------------------------------------------------


async def test_gateway_statuses_are_retried(serve: Serve) -> None:
    fake = Fake().on(
        "GET",
        "/rollout/gw/result",
        Answer(502, b"Bad Gateway"),
        Answer(503, b"Service Unavailable"),
        Answer(200, result_json("gw", "success")),
    )
    # Two transport errors use up their own schedule; a gateway error still gets its retry.
    fake.on(
        "GET", "/rollout/mix/result", Answer(502, b""), Answer(200, result_json("mix", "success"))
    )
    transport = FaultyTransport(httpx.ReadError, httpx.ReadError)
    async with (
        fake_server(serve, fake) as url,
        RolloutClient(url=url) as client,
        faulty_client(url, transport) as faulty,
    ):
        gateway = make_handle(client, "gw", lease=30.0)
        mixed = make_handle(faulty, "mix", lease=30.0)
        results = await asyncio.gather(gateway, mixed)
    first, second, third = (s.at for s in fake.seen if s.path == "/rollout/gw/result")
    assert second - first >= 0.25 and third - second >= 0.5
    assert all(result.status is RolloutStatus.SUCCESS for result in results)
    assert (gateway.polls, gateway.poll_retries) == (1, 2)
    assert len(transport.result_gets) == 4
    assert (mixed.polls, mixed.poll_retries) == (1, 3)


async def test_gateway_retries_run_out_after_six(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handle_module, "GATEWAY_RETRY_DELAYS_SEC", (0.01,) * 6)
    fake = Fake().on("GET", "/rollout/gw/result", Answer(504, b"Gateway Timeout"))
    async with fake_server(serve, fake) as url, RolloutClient(url=url) as client:
        handle = make_handle(client, "gw", lease=30.0)
        error = await outcome(handle)
    assert isinstance(error, RolloutProtocolError)
    assert (error.status_code, str(error)) == (504, "GET /rollout/gw/result returned 504")
    assert fake.count("GET") == 7
    assert handle.last_poll_error == "GET /rollout/gw/result returned 504"


# -- errors that end polling at once ------------------------------------------------------------


async def test_bad_lease_and_unknown_id_from_the_real_server(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        real = await client.run_rollout_async(PROMPT, CHAT_URL, "mine", label="42")
        await real
        forged = make_handle(client, "mine", token="not-the-token")
        unknown = make_handle(client, "never-admitted")
        forbidden = await outcome(forged)
        missing = await outcome(unknown)
    assert isinstance(forbidden, RolloutProtocolError)
    assert (forbidden.status_code, str(forbidden)) == (403, "GET /rollout/mine/result returned 403")
    assert isinstance(missing, RolloutProtocolError)
    assert (missing.status_code, str(missing)) == (
        404,
        "GET /rollout/never-admitted/result returned 404",
    )
    assert srv.recorder.count("GET", "/rollout/never-admitted/result") == 1
    assert forged.status is RolloutStatus.QUEUED and forged.polls == 0


async def test_unexpected_statuses_and_bodies_are_not_retried(serve: Serve) -> None:
    invalid = "returned an invalid response"
    cases: dict[str, tuple[Answer, int, str]] = {
        "crash": (Answer(500, b"Internal Server Error"), 500, "returned 500"),
        "auth": (Answer(401, {"detail": "unauthorized"}), 401, "returned 401"),
        "gone": (Answer(410, b""), 410, "returned 410"),
        "busy": (Answer(429, b"", {"Retry-After": "1"}), 429, "returned 429"),
        "moved": (Answer(301, b"", {"Location": "/rollout/ok/result"}), 301, "returned 301"),
        "html": (Answer(200, b"<html>"), 200, invalid),
        "shape": (Answer(200, {"rollout_id": "shape"}), 200, invalid),
        "weird": (Answer(200, result_json("weird", "paused")), 200, invalid),
        "nan": (
            Answer(200, b'{"rollout_id":"nan","status":"success","sample":{"reward":NaN}}'),
            200,
            invalid,
        ),
        "foreign": (
            Answer(200, result_json("someone-else", "success")),
            200,
            "returned a different rollout_id",
        ),
    }
    fake = Fake().on("GET", "/rollout/ok/result", Answer(200, result_json("ok", "success")))
    for rollout_id, (answer, _, _) in cases.items():
        fake.on("GET", f"/rollout/{rollout_id}/result", answer)
    async with fake_server(serve, fake) as url, RolloutClient(url=url) as client:
        handles = {rollout_id: make_handle(client, rollout_id) for rollout_id in cases}
        errors = {rollout_id: await outcome(handle) for rollout_id, handle in handles.items()}
    for rollout_id, (_, status, tail) in cases.items():
        error = errors[rollout_id]
        assert isinstance(error, RolloutProtocolError), rollout_id
        assert error.status_code == status, rollout_id
        assert str(error) == f"GET /rollout/{rollout_id}/result {tail}", rollout_id
        assert fake.count("GET", f"/rollout/{rollout_id}/") == 1, rollout_id
        assert handles[rollout_id].poll_retries == 0
    assert fake.count("GET", "/rollout/ok/") == 0  # redirects are not followed


async def test_unknown_status_is_not_terminal(serve: Serve) -> None:
    fake = Fake().on(
        "GET",
        "/rollout/u/result",
        Answer(200, result_json("u", "unknown")),
        Answer(200, result_json("u", "success")),
    )
    async with fake_server(serve, fake) as url, RolloutClient(url=url) as client:
        handle = make_handle(client, "u")
        result = await handle
    assert result.status is RolloutStatus.SUCCESS
    assert [t.status for t in handle.transitions] == [
        RolloutStatus.QUEUED,
        RolloutStatus.UNKNOWN,
        RolloutStatus.SUCCESS,
    ]
