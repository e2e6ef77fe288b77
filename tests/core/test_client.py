"""RolloutClient against a real uvicorn rollout server (PROTOCOL.md §5.6, §5.7, §6.1, §6.4).

Scripted fake servers stand in only for peer misbehaviour that server_stub cannot produce
(429s on demand, odd bodies, slow answers). The helpers at the top are shared with
test_handle.py and test_client_faults.py.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from core import (
    POLLING_LEASE_HEADER,
    RolloutAdmissionTimeoutError,
    RolloutClient,
    RolloutHandle,
    RolloutInitResponse,
    RolloutProtocolError,
    RolloutStatus,
)
from core import client as client_module
from core.client import retry_after_seconds
from server_stub import LocalBackend, create_rollout_server
from tests.conftest import Serve
from tests.server.plugins import Echo, ExactMatch

PROMPT = [{"role": "user", "content": "6*7?"}]
# Echo answers by itself, so the chat endpoint is never called.
CHAT_URL = "http://127.0.0.1:9/v1"

REQUEST_KEYS = [
    "initial_messages",
    "label",
    "metadata",
    "rollout_id",
    "chat_completions_url",
    "llm_api_key",
    "grade",
    "agent_timeout_sec",
    "grader_timeout_sec",
    "extra_fields",
]

Scope = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]


# -- shared helpers ---------------------------------------------------------------------------


@dataclass
class Seen:
    """One request as a server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytearray = field(default_factory=bytearray)
    at: float = field(default_factory=time.monotonic)

    @classmethod
    def of(cls, scope: Scope) -> Seen:
        """The request an ASGI `scope` starts (its body is added as it is received)."""
        return cls(
            scope["method"],
            scope["path"],
            {k.decode().lower(): v.decode() for k, v in scope["headers"]},
        )

    def json(self) -> Any:
        return json.loads(bytes(self.body))


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


class Recorder:
    """ASGI wrapper that records every HTTP request on its way into the wrapped app."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[Seen] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        seen = Seen.of(scope)
        self.seen.append(seen)

        async def recording_receive() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                seen.body.extend(message.get("body", b""))
            return message

        await self.app(scope, recording_receive, send)

    def count(self, method: str, path: str | None = None, *, suffix: str | None = None) -> int:
        return sum(
            1
            for s in self.seen
            if s.method == method
            and (path is None or s.path == path)
            and (suffix is None or s.path.endswith(suffix))
        )


@dataclass
class RealServer:
    url: str
    recorder: Recorder
    app: Any

    def client(self, **kwargs: Any) -> RolloutClient:
        return RolloutClient(url=self.url, **kwargs)

    @property
    def active_rollouts(self) -> int:
        return int(self.app.state.rollout_server.registry.active)


@asynccontextmanager
async def real_server(
    serve: Serve,
    *,
    wait: float = 0.2,
    lease: float = 2.0,
    retention: float = 900.0,
    api_key: str | None = None,
) -> AsyncIterator[RealServer]:
    """server_stub with the Echo workflow and ExactMatch grader, on a loopback port."""
    app = create_rollout_server(
        backend=LocalBackend(workflow=Echo, grader=ExactMatch),
        configure_logging=False,
        result_wait_timeout_sec=wait,
        polling_lease_timeout_sec=lease,
        result_retention_sec=retention,
        api_key=api_key,
    )
    recorder = Recorder(app)
    async with serve(recorder) as url:
        yield RealServer(url, recorder, app)


@dataclass
class Answer:
    """A scripted response; `delay` holds it back (released early when the fake stops)."""

    status: int = 200
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0

    def encoded(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


Script = Answer | Callable[[Seen], Answer]


class Fake:
    """A scripted peer. Routes: (method, path); a path ending in `*` matches a prefix.

    Each route answers from its list in order and repeats the last entry forever.
    """

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], list[Script]] = {}
        self.seen: list[Seen] = []
        self.release = asyncio.Event()

    def on(self, method: str, path: str, *answers: Script) -> Fake:
        self.routes[(method, path)] = list(answers)
        return self

    def count(self, method: str, prefix: str = "") -> int:
        return sum(1 for s in self.seen if s.method == method and s.path.startswith(prefix))

    def _route(self, method: str, path: str) -> list[Script] | None:
        for (m, p), answers in self.routes.items():
            if m == method and (path == p or (p.endswith("*") and path.startswith(p[:-1]))):
                return answers
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        seen = Seen.of(scope)
        self.seen.append(seen)
        more = True
        while more:
            message = await receive()
            seen.body.extend(message.get("body", b""))
            more = message.get("more_body", False)
        answers = self._route(seen.method, seen.path)
        if answers is None:
            script: Script = Answer(404, {"detail": "Not Found"})
        else:
            script = answers.pop(0) if len(answers) > 1 else answers[0]
        answer = script(seen) if callable(script) else script
        if answer.delay:
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.release.wait(), answer.delay)
        headers = [(b"content-type", b"application/json")]
        headers += [(k.lower().encode(), v.encode()) for k, v in answer.headers.items()]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.encoded()})


@asynccontextmanager
async def fake_server(serve: Serve, fake: Fake) -> AsyncIterator[str]:
    async with serve(fake) as url:
        try:
            yield url
        finally:
            fake.release.set()  # held answers end now, so uvicorn shuts down at once


def admission_json(
    rollout_id: str,
    *,
    status: str = "queued",
    wait: float = 0.2,
    lease: float = 30.0,
    token: str = "tok",
) -> dict[str, Any]:
    return {
        "rollout_id": rollout_id,
        "status": status,
        "polling_lease_token": token,
        "result_wait_timeout_sec": wait,
        "polling_lease_timeout_sec": lease,
    }


def admit_echo(seen: Seen) -> Answer:
    """A 202 for whatever id was posted."""
    return Answer(202, admission_json(seen.json()["rollout_id"]))


def result_json(rollout_id: str, status: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "rollout_id": rollout_id,
        "status": status,
        "sample": None,
        "err_message": None,
        "err_category": None,
    }
    body.update(extra)
    return body


def make_handle(
    client: RolloutClient,
    rollout_id: str = "r1",
    *,
    status: str = "queued",
    wait: float = 0.2,
    lease: float = 30.0,
    token: str = "tok",
    **kwargs: Any,
) -> RolloutHandle:
    """A handle built directly from a hand-made admission (the constructor is public)."""
    admission = RolloutInitResponse.model_validate(
        admission_json(rollout_id, status=status, wait=wait, lease=lease, token=token)
    )
    return RolloutHandle(client, admission, **kwargs)


class FaultyTransport(httpx.AsyncBaseTransport):
    """Real HTTP underneath, with faults injected into result GETs, one per GET in order.

    A fault is an httpx exception class (raised before the request leaves), "hang" (never
    answers), or a float (delay in seconds before the request leaves). `None` = no fault.
    """

    def __init__(self, *faults: type[httpx.TransportError] | str | float | None) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.faults: list[type[httpx.TransportError] | str | float | None] = list(faults)
        self.result_gets: list[tuple[float, str | None]] = []
        self.raised: list[Exception] = []
        self.post_fault: type[httpx.TransportError] | None = None
        self.posts = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/rollout"):
            self.posts += 1
            if self.post_fault is not None:
                raise self.post_fault("injected", request=request)
        if request.method == "GET" and request.url.path.endswith("/result"):
            self.result_gets.append((time.monotonic(), request.headers.get(POLLING_LEASE_HEADER)))
            fault = self.faults.pop(0) if self.faults else None
            if isinstance(fault, type):
                error = fault("injected", request=request)
                self.raised.append(error)
                raise error
            if fault == "hang":
                await asyncio.sleep(3600)
            if isinstance(fault, float):
                await asyncio.sleep(fault)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


# -- admission against the real server ----------------------------------------------------------


async def test_run_rollout_returns_the_graded_result(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        result = await client.run_rollout(PROMPT, CHAT_URL, "ok-1", label="42")
    assert result.status is RolloutStatus.SUCCESS
    assert result.rollout_id == "ok-1"
    assert result.sample is not None
    assert result.sample.reward == 1.0
    assert result.sample.messages[-1] == {"role": "assistant", "content": "42"}
    # The persistence-only copy is never sent, and a received sample is not given one: a
    # long run keeps every finished rollout's conversation once, not twice.
    assert result.sample.trajectory_messages is None
    assert srv.recorder.count("POST", "/rollout") == 1
    assert srv.recorder.count("GET", suffix="/result") >= 1


async def test_request_body_has_all_ten_keys_in_order(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        # Positional, in the official parameter order.
        await client.run_rollout(PROMPT, CHAT_URL, "keys-1", None, "42")
    (post,) = [s for s in srv.recorder.seen if s.method == "POST"]
    body = post.json()
    assert list(body) == REQUEST_KEYS
    assert body == {
        "initial_messages": PROMPT,
        "label": "42",
        "metadata": None,
        "rollout_id": "keys-1",
        "chat_completions_url": CHAT_URL,
        "llm_api_key": None,
        "grade": True,
        "agent_timeout_sec": None,
        "grader_timeout_sec": None,
        "extra_fields": None,
    }
    assert post.headers["content-type"] == "application/json"
    assert "authorization" not in post.headers


async def test_invalid_requests_fail_client_side(serve: Serve) -> None:
    cases: list[dict[str, Any]] = [
        {"rollout_id": "a/b"},
        {"rollout_id": "a\\b"},
        {"rollout_id": ".."},
        {"rollout_id": ""},
        {"llm_api_key": ""},
        {"agent_timeout_sec": math.inf},
        {"grader_timeout_sec": math.nan},
    ]
    async with real_server(serve) as srv, srv.client() as client:
        for overrides in cases:
            arguments: dict[str, Any] = {
                "initial_messages": PROMPT,
                "chat_completions_url": CHAT_URL,
                "rollout_id": "fine",
                **overrides,
            }
            with pytest.raises(ValidationError):
                await client.run_rollout_async(**arguments)
            with pytest.raises(ValidationError):
                await client.run_rollout(**arguments)
    assert srv.recorder.seen == []


async def test_duplicate_id_is_a_protocol_error_409(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        first = await client.run_rollout_async(PROMPT, CHAT_URL, "dup", label="42")
        with pytest.raises(RolloutProtocolError) as caught:
            await client.run_rollout_async(PROMPT, CHAT_URL, "dup", label="42")
        assert (await first).status is RolloutStatus.SUCCESS
    assert caught.value.status_code == 409
    assert str(caught.value) == "POST /rollout returned 409; only 202 and 429 are accepted"
    assert srv.recorder.count("POST", "/rollout") == 2


async def test_api_key_is_sent_on_every_request(serve: Serve) -> None:
    async with real_server(serve, api_key="s3cret") as srv:
        async with srv.client(api_key="s3cret") as client:
            result = await client.run_rollout(PROMPT, CHAT_URL, "auth-1", label="42")
            health = await client.health()
            cancelled = await client.cancel_rollout("auth-1")
            await client.wait_idle(timeout_sec=5, poll_interval_sec=0.05)
        async with srv.client() as anonymous:
            with pytest.raises(RolloutProtocolError) as post_error:
                await anonymous.run_rollout_async(PROMPT, CHAT_URL, "auth-2", label="42")
            with pytest.raises(RolloutProtocolError) as health_error:
                await anonymous.health()
    assert result.status is RolloutStatus.SUCCESS
    assert health["lifecycle"]["accepting_rollouts"] is True
    assert cancelled.dispositions == {"auth-1": "not_found"}
    authorized = [s for s in srv.recorder.seen if "authorization" in s.headers]
    assert {s.headers["authorization"] for s in authorized} == {"Bearer s3cret"}
    assert {(s.method, s.path.rsplit("/", 1)[-1]) for s in authorized} >= {
        ("POST", "rollout"),
        ("GET", "result"),
        ("GET", "health"),
        ("POST", "cancel"),
    }
    assert post_error.value.status_code == 401
    assert str(post_error.value) == "POST /rollout returned 401; only 202 and 429 are accepted"
    assert (health_error.value.status_code, str(health_error.value)) == (401, "GET /health failed")


async def test_admission_deadline_does_not_cover_polling(serve: Serve) -> None:
    # The rollout runs past the admission deadline, which a loaded machine's admission itself
    # (connecting, the POST) must not reach: 0.2 s once did, in a full suite run.
    async with real_server(serve) as srv, srv.client(admission_timeout_sec=1.0) as client:
        result = await client.run_rollout(
            PROMPT, CHAT_URL, "slow-ok", label="42", metadata={"sleep": 1.5}
        )
    assert result.status is RolloutStatus.SUCCESS


async def test_post_transport_errors_are_not_retried(serve: Serve) -> None:
    transport = FaultyTransport()
    transport.post_fault = httpx.ReadError
    async with real_server(serve) as srv, httpx.AsyncClient(transport=transport) as http:
        client = RolloutClient(url=srv.url, http_client=http)
        with pytest.raises(httpx.ReadError):
            await client.run_rollout_async(PROMPT, CHAT_URL, "lost", label="42")
    assert transport.posts == 1
    assert srv.recorder.seen == []


async def test_connection_refused_is_raised_unchanged() -> None:
    async with RolloutClient(url="http://127.0.0.1:9", admission_timeout_sec=5) as client:
        with pytest.raises(httpx.ConnectError):
            await client.run_rollout_async(PROMPT, CHAT_URL, "nobody-home")


# -- constructor and lifecycle ----------------------------------------------------------------


def test_constructor_validates_and_normalises() -> None:
    with pytest.raises(ValueError, match=r"^admission_timeout_sec must be finite; omit it"):
        RolloutClient(url="http://x", admission_timeout_sec=math.nan, api_key="")
    for bad in ("", "   "):
        with pytest.raises(ValueError, match=r"^api_key must be non-empty when provided$"):
            RolloutClient(url="http://x", api_key=bad)
    with pytest.raises(ValueError, match=r"omit it to wait unbounded$"):
        RolloutClient(url="http://x", admission_timeout_sec=-math.inf)
    client = RolloutClient(url="http://host:1/base///", admission_timeout_sec=0)
    assert client.url == "http://host:1/base"
    assert client.owns_http_client is True
    assert client.admission_timeout_sec == 0
    assert isinstance(client.http_client, httpx.AsyncClient)


async def test_context_manager_closes_only_an_owned_client() -> None:
    async with RolloutClient(url="http://x") as owned:
        assert not owned.http_client.is_closed
    assert owned.http_client.is_closed

    supplied = httpx.AsyncClient()
    async with RolloutClient(url="http://x", http_client=supplied) as borrowing:
        assert borrowing.owns_http_client is False
        assert borrowing.http_client is supplied
    assert not supplied.is_closed
    await RolloutClient(url="http://x", http_client=supplied).aclose()
    assert not supplied.is_closed
    await supplied.aclose()


def test_core_exports_the_official_names() -> None:
    import core

    for name in (
        "RolloutClient",
        "RolloutHandle",
        "RolloutProtocolError",
        "RolloutAdmissionTimeoutError",
        "RolloutInitRequest",
        "RolloutInitResponse",
        "RolloutResultResponse",
        "RolloutSample",
        "RolloutStatus",
        "CancelRolloutsResponse",
    ):
        assert name in core.__all__
        assert getattr(core, name) is not None
    assert issubclass(core.RolloutAdmissionTimeoutError, TimeoutError)
    assert issubclass(core.RolloutProtocolError, RuntimeError)


# -- 429 backpressure and the admission deadline (fakes: server_stub only sends Retry-After: 5) --


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, 1.0),
        ("abc", 1.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 1.0),
        ("inf", 1.0),
        ("nan", 1.0),
        ("-inf", 1.0),
        ("0", 0.05),
        ("-3", 0.05),
        ("0.3", 0.3),
        (" 5 ", 5.0),
        ("61", 60.0),
        ("1e9", 60.0),
    ],
)
def test_retry_after_is_clamped_with_a_one_second_fallback(
    header: str | None, expected: float
) -> None:
    headers = {} if header is None else {"Retry-After": header}
    assert retry_after_seconds(httpx.Response(429, headers=headers)) == expected


async def test_429_then_202_waits_retry_after_and_leases_from_the_last_attempt(
    serve: Serve,
) -> None:
    fake = Fake()
    fake.on(
        "POST",
        "/rollout",
        Answer(429, {"detail": "rollout queue is full; retry later"}, {"Retry-After": "0.3"}),
        admit_echo,
    )
    fake.on("GET", "/rollout/*", lambda seen: Answer(200, result_json("bp", "success")))
    async with fake_server(serve, fake) as url, RolloutClient(url=url) as client:
        handle = await client.run_rollout_async(PROMPT, CHAT_URL, "bp")
        lease_start = handle.lease.deadline - 30.0
        result = await handle
    first, second = [s for s in fake.seen if s.method == "POST"]
    assert second.at - first.at >= 0.3
    # The lease is counted from the start of the POST that got the 202, not the first one.
    assert first.at + 0.3 <= lease_start <= second.at
    assert first.body == second.body
    assert result.status is RolloutStatus.SUCCESS


async def test_admission_deadline_during_a_429_wait_has_no_suffix(serve: Serve) -> None:
    fake = Fake().on("POST", "/rollout", Answer(429, {}, {"Retry-After": "5"}))
    async with (
        fake_server(serve, fake) as url,
        RolloutClient(url=url, admission_timeout_sec=0.3) as client,
    ):
        with pytest.raises(RolloutAdmissionTimeoutError) as caught:
            await client.run_rollout_async(PROMPT, CHAT_URL, "busy")
    assert str(caught.value) == "admission for rollout busy timed out after 0.3 seconds"
    assert isinstance(caught.value.__cause__, TimeoutError)
    assert fake.count("POST", "/rollout") == 1
    assert fake.count("POST", "/rollout/cancel") == 0


async def test_admission_deadline_during_a_request_says_it_may_have_succeeded(
    serve: Serve,
) -> None:
    # The first attempt is answered 429 quickly; the second one hangs past the deadline.
    fake = Fake().on(
        "POST",
        "/rollout",
        Answer(429, {}, {"Retry-After": "0.05"}),
        lambda seen: Answer(202, admission_json("hang"), delay=5.0),
    )
    async with fake_server(serve, fake) as url:
        async with RolloutClient(url=url, admission_timeout_sec=0.4) as client:
            with pytest.raises(RolloutAdmissionTimeoutError) as caught:
                await client.run_rollout_async(PROMPT, CHAT_URL, "hang")
        await asyncio.sleep(0.05)
    assert str(caught.value) == (
        "admission for rollout hang timed out after 0.4 seconds; admission may have succeeded; "
        "the server requests cancellation when an unobserved rollout's polling lease expires"
    )
    assert isinstance(caught.value.__cause__, TimeoutError)
    assert fake.count("POST", "/rollout") == 2
    # Never cancelled automatically: the id might belong to someone else's rollout.
    assert fake.count("POST", "/rollout/cancel") == 0


async def test_zero_admission_timeout_prints_as_given(serve: Serve) -> None:
    fake = Fake().on("POST", "/rollout", admit_echo)
    async with (
        fake_server(serve, fake) as url,
        RolloutClient(url=url, admission_timeout_sec=0) as client,
    ):
        with pytest.raises(RolloutAdmissionTimeoutError) as caught:
            await client.run_rollout_async(PROMPT, CHAT_URL, "zero")
    assert str(caught.value).startswith("admission for rollout zero timed out after 0 seconds;")


async def test_transport_timeout_is_not_converted(serve: Serve) -> None:
    fake = Fake().on("POST", "/rollout", Answer(202, admission_json("t"), delay=5.0))
    async with fake_server(serve, fake) as url, httpx.AsyncClient(timeout=0.2) as http:
        client = RolloutClient(url=url, http_client=http, admission_timeout_sec=10)
        with pytest.raises(httpx.ReadTimeout):
            await client.run_rollout_async(PROMPT, CHAT_URL, "t")
    assert fake.count("POST") == 1


async def test_unacceptable_admission_answers(serve: Serve) -> None:
    only = "only 202 and 429 are accepted"
    invalid = "POST /rollout returned an invalid response"
    cases: dict[str, tuple[Answer, int, str]] = {
        "ok200": (Answer(200, admission_json("ok200")), 200, f"POST /rollout returned 200; {only}"),
        "moved": (
            Answer(307, b"", {"Location": "/elsewhere"}),
            307,
            f"POST /rollout returned 307; {only}",
        ),
        "down": (
            Answer(503, {"detail": "shutting down"}),
            503,
            f"POST /rollout returned 503; {only}",
        ),
        "html": (Answer(202, b"<html>"), 202, invalid),
        "short": (Answer(202, admission_json("short", wait=1.0, lease=1.0)), 202, invalid),
        "inf": (Answer(202, admission_json("inf", wait=0.0)), 202, invalid),
        "notoken": (Answer(202, admission_json("notoken", token="")), 202, invalid),
        "paused": (Answer(202, admission_json("paused", status="paused")), 202, invalid),
        "other": (
            Answer(202, admission_json("someone")),
            202,
            "POST /rollout returned a different rollout_id",
        ),
    }
    fake = Fake().on("POST", "/rollout", lambda seen: cases[seen.json()["rollout_id"]][0])
    fake.on("POST", "/elsewhere", admit_echo)
    async with fake_server(serve, fake) as url, RolloutClient(url=url) as client:
        for rollout_id, (_, status, message) in cases.items():
            with pytest.raises(RolloutProtocolError) as caught:
                await client.run_rollout_async(PROMPT, CHAT_URL, rollout_id)
            assert (caught.value.status_code, str(caught.value)) == (status, message), rollout_id
    assert fake.count("POST", "/rollout") == len(cases)  # one attempt each
    assert fake.count("POST", "/elsewhere") == 0  # redirects are never followed
    assert fake.count("GET") == 0


async def test_admission_status_becomes_the_initial_status(serve: Serve) -> None:
    fake = Fake().on("POST", "/rollout", Answer(202, admission_json("r", status="running")))
    fake.on("GET", "/rollout/*", Answer(200, result_json("r", "success")))
    async with fake_server(serve, fake) as url, RolloutClient(url=url) as client:
        handle = await client.run_rollout_async(PROMPT, CHAT_URL, "r", grade=False)
        assert handle.status is RolloutStatus.RUNNING
        assert handle.latest_result is None
        assert fake.count("GET") == 0  # no GET before the caller gets the handle
        await handle
    assert [t.status for t in handle.transitions] == [RolloutStatus.RUNNING, RolloutStatus.SUCCESS]


# -- cancel_rollout -----------------------------------------------------------------------------


async def test_cancel_rollout_posts_one_id_and_returns_dispositions(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        handle = await client.run_rollout_async(
            PROMPT, CHAT_URL, "c-1", label="42", metadata={"sleep": 10}
        )
        await handle.wait_for_running()
        answer = await client.cancel_rollout("c-1")
        again = await client.cancel_rollout("unknown-id")
        result = await handle
    assert answer.dispositions == {"c-1": "cancelled_running"}
    assert again.dispositions == {"unknown-id": "not_found"}
    cancel = next(s for s in srv.recorder.seen if s.path == "/rollout/cancel")
    assert bytes(cancel.body) == b'{"ids":["c-1"],"prefix":null,"all":false}'
    assert cancel.headers["content-type"] == "application/json"
    assert result.status is RolloutStatus.CANCELLED


async def test_cancel_rollout_rejects_bad_answers(serve: Serve) -> None:
    invalid = "POST /rollout/cancel returned an invalid response"
    cases: dict[str, tuple[Answer, int, str]] = {
        "crash": (Answer(500, b"Internal Server Error"), 500, "POST /rollout/cancel returned 500"),
        "moved": (Answer(302, b"", {"Location": "/x"}), 302, "POST /rollout/cancel returned 302"),
        "html": (Answer(200, b"[not json"), 200, invalid),
        "shape": (Answer(200, {"dispositions": 3}), 200, invalid),
    }
    fake = Fake().on("POST", "/rollout/cancel", lambda seen: cases[seen.json()["ids"][0]][0])
    async with fake_server(serve, fake) as url, RolloutClient(url=url) as client:
        for rollout_id, (_, status, message) in cases.items():
            with pytest.raises(RolloutProtocolError) as caught:
                await client.cancel_rollout(rollout_id)
            assert (caught.value.status_code, str(caught.value)) == (status, message), rollout_id
    assert fake.count("POST") == len(cases)
    assert fake.count("POST", "/x") == 0


async def test_cancel_rollout_is_bounded_by_wall_clock(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_module, "CANCEL_WALL_TIMEOUT_SEC", 0.2)
    fake = Fake().on("POST", "/rollout/cancel", Answer(200, {"dispositions": {}}, delay=5.0))
    async with fake_server(serve, fake) as url, RolloutClient(url=url) as client:
        started = time.monotonic()
        with pytest.raises(TimeoutError) as caught:
            await client.cancel_rollout("x")
        elapsed = time.monotonic() - started
    assert type(caught.value) is TimeoutError  # the builtin, not an httpx timeout
    assert elapsed < 4.0  # the 5 s httpx timeout did not decide it


# -- health and wait_idle -----------------------------------------------------------------------


async def test_health_errors(serve: Serve) -> None:
    cases: dict[str, tuple[Answer, int, str]] = {
        "crash": (Answer(500, b"Internal Server Error"), 500, "GET /health failed"),
        "moved": (Answer(302, b"", {"Location": "/ok/health"}), 302, "GET /health failed"),
        "html": (Answer(200, b"<html>"), 200, "GET /health returned invalid JSON"),
        "list": (Answer(200, [1, 2]), 200, "GET /health returned invalid JSON"),
        "null": (Answer(200, b"null"), 200, "GET /health returned invalid JSON"),
        # Too deep for Python's parser: a RecursionError escaped every probe before.
        "deep": (Answer(200, b"[" * 100_000), 200, "GET /health returned invalid JSON"),
    }
    fake = Fake().on("GET", "/ok/health", Answer(200, {}))
    for case, (answer, _, _) in cases.items():
        fake.on("GET", f"/{case}/health", answer)

    async def read(url: str, http: httpx.AsyncClient) -> BaseException | None:
        try:
            await RolloutClient(url=url, http_client=http).health()
        except RolloutProtocolError as exc:
            return exc
        return None

    async with fake_server(serve, fake) as url, httpx.AsyncClient() as http:
        errors = await asyncio.gather(*(read(f"{url}/{case}/", http) for case in cases))
    for (case, (_, status, message)), error in zip(cases.items(), errors, strict=True):
        assert isinstance(error, RolloutProtocolError), case
        assert (error.status_code, str(error)) == (status, message), case
    assert fake.count("GET", "/ok/") == 0


def _health(process_id: Any = "p1", active: int = 0, **extra: Any) -> Answer:
    body = {"status": "ok", "process_id": process_id, **extra}
    body.setdefault("lifecycle", {"accepting_rollouts": True, "active_rollouts": active})
    return Answer(200, body)


async def test_health_and_wait_idle_on_the_real_server(serve: Serve) -> None:
    async with real_server(serve) as srv, srv.client() as client:
        health = await client.health()
        idle = await client.wait_idle(timeout_sec=5, poll_interval_sec=0.05)
        handle = await client.run_rollout_async(
            PROMPT, CHAT_URL, "w-1", label="42", metadata={"sleep": 0.5}
        )
        await handle.wait_for_running()
        busy = srv.active_rollouts
        after = await client.wait_idle(
            timeout_sec=5, poll_interval_sec=0.05, process_id=idle["process_id"]
        )
        finished = srv.active_rollouts
        with pytest.raises(RolloutProtocolError) as restarted:
            await client.wait_idle(timeout_sec=5, poll_interval_sec=0.05, process_id="other")
        result = await handle
    assert health["status"] == "ok"
    assert health["concurrency"]["max_concurrent"] == 4
    assert health["lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}
    assert health["process_id"] == idle["process_id"] == after["process_id"]
    assert (busy, finished) == (1, 0)
    assert after["lifecycle"]["active_rollouts"] == 0
    assert result.status is RolloutStatus.SUCCESS
    assert srv.recorder.count("GET", "/health") >= 5  # wait_idle read at least twice
    assert (restarted.value.status_code, str(restarted.value)) == (
        200,
        "Server restarted while waiting",
    )


async def test_wait_idle_against_scripted_servers(serve: Serve) -> None:
    no_identity = "Server has no lifecycle identity"
    no_state = "Server has no valid lifecycle state"
    # Each case lives under its own base path of one fake server: (answers, outcome).
    cases: dict[str, tuple[list[Answer], int | str | type[BaseException]]] = {
        "idle": ([_health(active=2), _health(active=0)], 2),
        "transient": (
            [Answer(503, b""), Answer(429, b""), Answer(502, b""), Answer(408, b""), _health()],
            5,
        ),
        "restart": ([_health("p1", active=2), _health("p2")], "Server restarted while waiting"),
        "404": ([Answer(404, {"detail": "Not Found"})], "GET /health failed"),
        "none": ([_health(process_id=None)], no_identity),
        "empty": ([_health(process_id="")], no_identity),
        "number": ([_health(process_id=7)], no_identity),
        "nolife": ([_health(lifecycle=None)], no_state),
        "partial": ([_health(lifecycle={"active_rollouts": 0})], no_state),
        "negative": (
            [_health(lifecycle={"accepting_rollouts": True, "active_rollouts": -1})],
            no_state,
        ),
        # Unlike a 5xx, an unreadable body is not retried.
        "garbled": ([Answer(200, b"{oops")], "GET /health returned invalid JSON"),
        "busy": ([_health(active=1)], TimeoutError),
    }
    fake = Fake()
    for case, (answers, _) in cases.items():
        fake.on("GET", f"/{case}/health", *answers)

    async def wait(url: str, http: httpx.AsyncClient) -> dict[str, Any] | BaseException:
        client = RolloutClient(url=url, http_client=http)
        try:
            return await client.wait_idle(timeout_sec=0.5, poll_interval_sec=0.05)
        except (RolloutProtocolError, TimeoutError) as exc:
            return exc

    # One shared httpx client: building one per case costs more than the cases themselves.
    async with fake_server(serve, fake) as url, httpx.AsyncClient() as http:
        outcomes = await asyncio.gather(*(wait(f"{url}/{case}", http) for case in cases))
    for (case, (_, expected)), got in zip(cases.items(), outcomes, strict=True):
        reads = fake.count("GET", f"/{case}/")
        if isinstance(expected, int):  # idle after that many reads
            assert isinstance(got, dict), case
            assert got["lifecycle"]["active_rollouts"] == 0, case
            assert reads == expected, case
        elif isinstance(expected, str):
            assert isinstance(got, RolloutProtocolError), case
            assert str(got) == expected, case
            assert got.status_code == (404 if case == "404" else 200), case
            assert reads == (2 if case == "restart" else 1), case
        else:
            assert type(got) is expected, case
            assert reads >= 2, case


async def test_wait_idle_retries_transport_errors() -> None:
    # Nothing listens on port 9: every read is a ConnectError, so only the deadline ends it.
    async with RolloutClient(url="http://127.0.0.1:9") as client:
        with pytest.raises(TimeoutError):
            await client.wait_idle(timeout_sec=0.15, poll_interval_sec=0.05)


@pytest.mark.parametrize(
    "arguments",
    [
        {"timeout_sec": 0},
        {"timeout_sec": -1},
        {"timeout_sec": math.inf},
        {"poll_interval_sec": 0},
        {"poll_interval_sec": math.nan},
    ],
)
async def test_wait_idle_checks_its_arguments(arguments: dict[str, Any]) -> None:
    async with RolloutClient(url="http://127.0.0.1:9") as client:
        with pytest.raises(ValueError, match=r"^wait timeouts must be positive and finite$"):
            await client.wait_idle(**arguments)
