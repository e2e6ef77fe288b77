"""Malformed server answers against the client (issue 7 §2): wrong JSON, wrong types, huge
bodies, a slow drip. Each ends in `RolloutProtocolError` or an httpx transport error, within a
bounded time, never anything else.

Generated bodies go through `httpx.MockTransport` (the parsing is what is tested); huge and
dripping bodies go over real loopback sockets through the client's own transport.
tests/core/test_client_faults.py has the hand-picked cases (HTML, wrong shape, NaN, foreign
id, odd statuses); this adds generated ones and the byte-level misbehaviour.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import (
    RolloutClient,
    RolloutHandle,
    RolloutInitResponse,
    RolloutProtocolError,
    RolloutStatus,
)
from core import handle as handle_module
from core.types import RolloutResultResponse
from tests.reliability.counts import scaled

T = TypeVar("T")
FUZZ = settings(
    max_examples=scaled(150, 2000),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
BOUND_SEC = 5.0
PROMPT = [{"role": "user", "content": "hi"}]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
STATUSES = [s.value for s in RolloutStatus]


def encode(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


@st.composite
def result_bodies(draw: st.DrawFn) -> bytes:
    """Answers to GET /result: near-miss result objects, any JSON, or raw bytes."""
    kind = draw(st.sampled_from(["shaped", "json", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=100))
    if kind == "json":
        return encode(draw(json_values))
    body = {
        "rollout_id": draw(st.sampled_from(["r", "other"]) | json_values),
        "status": draw(st.sampled_from([*STATUSES, "paused", ""]) | json_values),
        "sample": draw(
            st.none()
            | st.fixed_dictionaries(
                {},
                optional={
                    "messages": json_values,
                    "reward": st.floats() | json_values,
                    "remove_sample": json_values,
                    "metrics": json_values,
                    "label": json_values,
                },
            )
            | json_values
        ),
        "err_message": draw(st.none() | st.text(max_size=10) | json_values),
        "err_category": draw(st.none() | st.sampled_from(["timeout", "agent_error", "x"])),
    }
    drop = draw(st.sets(st.sampled_from(sorted(body))))
    return encode({k: v for k, v in body.items() if k not in drop})


def admission(rollout_id: str = "r") -> RolloutInitResponse:
    return RolloutInitResponse(
        rollout_id=rollout_id,
        status=RolloutStatus.QUEUED,
        polling_lease_token="token",
        result_wait_timeout_sec=0.1,
        polling_lease_timeout_sec=30.0,
    )


def run_bounded(make: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(make(), BOUND_SEC)

    return asyncio.run(bounded())


def mock_client(answers: list[httpx.Response]) -> RolloutClient:
    """A client whose server answers from `answers` in order, repeating the last one."""

    def handler(request: httpx.Request) -> httpx.Response:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    return RolloutClient(
        url="http://mock", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler))
    )


TERMINAL = encode({"rollout_id": "r", "status": "success", "sample": None})


@FUZZ
@given(body=result_bodies())
def test_generated_result_bodies_give_a_result_or_a_protocol_error(body: bytes) -> None:
    async def poll() -> RolloutResultResponse | BaseException:
        # The generated answer first; a valid terminal one after it, in case it was valid
        # and not terminal (the handle then polls again).
        client = mock_client(
            [httpx.Response(200, content=body), httpx.Response(200, content=TERMINAL)]
        )
        try:
            handle = RolloutHandle(client, admission())
            try:
                return await handle
            except Exception as exc:
                return exc
        finally:
            await client.http_client.aclose()

    outcome = run_bounded(poll)
    if isinstance(outcome, BaseException):
        assert isinstance(outcome, RolloutProtocolError), repr(outcome)
        assert outcome.status_code == 200
        assert str(outcome) in (
            "GET /rollout/r/result returned an invalid response",
            "GET /rollout/r/result returned a different rollout_id",
        )
    else:
        assert outcome.rollout_id == "r"
        assert outcome.status in {
            RolloutStatus.SUCCESS,
            RolloutStatus.FAILURE,
            RolloutStatus.CANCELLED,
        }


@FUZZ
@given(
    status=st.sampled_from([200, 201, 202, 204, 301, 400, 404, 409, 410, 500, 502, 503]),
    body=result_bodies(),
)
def test_generated_admission_answers_give_a_handle_or_a_protocol_error(
    status: int, body: bytes
) -> None:
    async def admit() -> RolloutHandle | BaseException:
        client = mock_client(
            [httpx.Response(status, content=body), httpx.Response(200, content=TERMINAL)]
        )
        try:
            try:
                handle = await client.run_rollout_async(PROMPT, "http://chat", "r")
            except Exception as exc:
                return exc
            handle.cancel()
            return handle
        finally:
            await client.http_client.aclose()

    outcome = run_bounded(admit)
    if isinstance(outcome, BaseException):
        assert isinstance(outcome, RolloutProtocolError), repr(outcome)
        if status == 202:
            assert str(outcome) in (
                "POST /rollout returned an invalid response",
                "POST /rollout returned a different rollout_id",
            )
        else:
            assert str(outcome) == f"POST /rollout returned {status}; only 202 and 429 are accepted"
        assert outcome.status_code == status
    else:
        assert status == 202


@FUZZ
@given(status=st.sampled_from([200, 500, 503]), body=result_bodies())
def test_generated_health_and_cancel_answers(status: int, body: bytes) -> None:
    async def ask() -> tuple[object, object]:
        client = mock_client([httpx.Response(status, content=body)])
        results: list[object] = []
        for call in (client.health, lambda: client.cancel_rollout("r")):
            try:
                results.append(await call())
            except Exception as exc:
                results.append(exc)
        await client.http_client.aclose()
        return results[0], results[1]

    health, cancel = run_bounded(ask)
    for outcome in (health, cancel):
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, RolloutProtocolError), repr(outcome)
            assert outcome.status_code == status
    if not isinstance(health, BaseException):
        assert status == 200 and isinstance(health, dict)
    if not isinstance(cancel, BaseException):
        assert status == 200


# -- byte-level misbehaviour over real sockets ----------------------------------------------------

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[str]:
    writers: set[asyncio.StreamWriter] = set()

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.add(writer)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writers.discard(writer)
            writer.transport.abort()

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for writer in list(writers):
            writer.transport.abort()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))
    return head


def drip(body: bytes, every: float) -> Handler:
    """Answers 200 with `body`, one byte every `every` seconds."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % len(body)
        )
        for byte in body:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(every)

    return handle


async def test_a_claimed_huge_body_is_refused_at_once() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n{")
        await writer.drain()
        await asyncio.sleep(10)

    async with raw_server(handle) as url, RolloutClient(url=url) as client:
        handle_ = RolloutHandle(client, admission())
        started = time.monotonic()
        with pytest.raises(httpx.ReadError, match="exceeds"):
            await asyncio.wait_for(handle_, BOUND_SEC)
    assert time.monotonic() - started < 2


async def test_a_large_but_honest_result_is_read() -> None:
    body = encode(
        {"rollout_id": "r", "status": "failure", "sample": None, "err_message": "x" * 8_000_000}
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()

    async with raw_server(handle) as url, RolloutClient(url=url) as client:
        result = await asyncio.wait_for(RolloutHandle(client, admission()), BOUND_SEC)
    assert result.status is RolloutStatus.FAILURE
    assert len(result.err_message or "") == 8_000_000


async def test_a_dripping_admission_is_cut_by_the_admission_deadline() -> None:
    body = encode(admission().model_dump(mode="json"))
    async with (
        raw_server(drip(body, every=0.1)) as url,
        RolloutClient(url=url, admission_timeout_sec=0.5) as client,
    ):
        started = time.monotonic()
        with pytest.raises(
            TimeoutError, match=re.escape("timed out after 0.5 seconds; admission may have")
        ):
            await asyncio.wait_for(client.run_rollout_async(PROMPT, "http://chat", "r"), BOUND_SEC)
    assert time.monotonic() - started < 2


async def test_a_dripping_result_ends_polling_within_the_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Per GET: 0.1 s long-poll + 0.3 s grace. A body that takes 20 s to arrive, byte by byte
    # every 0.1 s, never trips a per-read timeout; the whole GET must still be bounded.
    monkeypatch.setattr(handle_module, "RESULT_READ_GRACE_SEC", 0.3)
    body = encode({"rollout_id": "r", "status": "running", "sample": None}) + b" " * 200
    async with raw_server(drip(body, every=0.1)) as url, RolloutClient(url=url) as client:
        handle = RolloutHandle(client, admission())
        started = time.monotonic()
        with pytest.raises((httpx.TimeoutException, RolloutProtocolError)):
            await asyncio.wait_for(asyncio.shield(handle.result_task), 3.0)
        elapsed = time.monotonic() - started
        handle.cancel()
    assert elapsed < 3
