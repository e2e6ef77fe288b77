"""A stub OpenAI-compatible chat endpoint: deterministic answers, latency and fault knobs.

`create_chat_app()` builds a Starlette app that answers `POST <any base path>/chat/completions`
(so per-rollout base URLs such as `http://127.0.0.1:P/v1/rollouts/<id>` work unchanged) with
the OpenAI response shape. What it answers comes from `server_stub.llm_answers` (the number
that solves the arithmetic question in the last user message); how and when, from the knobs in
`server_stub.llm_behaviour` (settings plus the per-request `X-Stub-Behaviour` header) and the
latency models in `server_stub.llm_latency`.

A request with `"stream": true` is answered as `text/event-stream` in the OpenAI streaming
format (`chat.completion.chunk` events, the reply split into a few content chunks, a last chunk
with `finish_reason` "stop", a usage chunk when `stream_options.include_usage` is true, then
`data: [DONE]`), so clients that stream, such as the OpenAI Agents integration, work too. Every
knob acts before the stream starts: the latency (or `slow`, `hang`) delays the first byte, an
injected error is an HTTP 500 with a JSON error body, never a broken stream. Both shapes report
`usage` counted from the text: the prompt is every request message's text, the completion the
reply.

Waits end early when the client goes away, so an abandoned call never holds up shutdown.
"""

from __future__ import annotations

import hmac
import itertools
import json
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from server_stub.llm_answers import count_tokens, reply_for, stream_pieces, text_of
from server_stub.llm_behaviour import (
    BEHAVIOUR_HEADER,
    StubChatSettings,
    parse_behaviour,
    plan_request,
)
from server_stub.log_safety import server_logger

logger = server_logger(__name__)

DEFAULT_MODEL = "osmosis-stub"


@dataclass
class StubChatStats:
    """Counters kept on `app.state.stats`, for tests and the demo."""

    requests: int = 0  # chat requests received, whatever the outcome
    completions: int = 0  # answered 200
    errors: int = 0  # injected 500s
    wrong_answers: int = 0  # 200s whose answer was deliberately wrong
    rejected: int = 0  # 400s and 401s
    disconnects: int = 0  # clients that left before the answer was ready
    streamed: int = 0  # completions sent as an event stream (`stream` true)
    in_flight: int = 0


# --- answer bodies ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One successful answer, whichever shape (one JSON body or an event stream) carries it."""

    id: str
    created: int
    model: str
    reply: str
    prompt_tokens: int
    completion_tokens: int

    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


def completion_body(answer: Answer) -> dict[str, Any]:
    """The `chat.completion` object of a request with `stream` false."""
    return {
        "id": answer.id,
        "object": "chat.completion",
        "created": answer.created,
        "model": answer.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer.reply},
                "finish_reason": "stop",
            }
        ],
        "usage": answer.usage(),
    }


def stream_events(answer: Answer, *, include_usage: bool) -> list[str]:
    """The server-sent events of a request with `stream` true, as OpenAI sends them.

    `chat.completion.chunk`s whose deltas carry the role and then the reply a few tokens at a
    time, one with `finish_reason` "stop", with `include_usage` a last one with no choices and
    the usage (the others then say `"usage": null`), and finally `data: [DONE]`.
    """

    def chunk(choices: list[dict[str, Any]]) -> dict[str, Any]:
        head = {"id": answer.id, "object": "chat.completion.chunk", "created": answer.created}
        return {**head, "model": answer.model, "choices": choices}

    def choice(delta: dict[str, str], finish_reason: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "finish_reason": finish_reason}

    pieces = stream_pieces(answer.reply)
    chunks = [chunk([choice({"role": "assistant", "content": pieces[0]})])]
    chunks += [chunk([choice({"content": piece})]) for piece in pieces[1:]]
    chunks.append(chunk([choice({}, "stop")]))
    if include_usage:
        for each in chunks:
            each["usage"] = None
        chunks.append({**chunk([]), "usage": answer.usage()})
    events = [f"data: {json.dumps(each, separators=(',', ':'))}\n\n" for each in chunks]
    return [*events, "data: [DONE]\n\n"]


# --- the app ------------------------------------------------------------------------------------


def _error(status: int, message: str, kind: str, code: str | None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(body, status_code=status)


async def _wait_unless_disconnected(request: Request, seconds: float) -> bool:
    """Sleep `seconds`; return early (True) if the client disconnects meanwhile.

    A hung or slow call whose client gave up would otherwise keep uvicorn from shutting down,
    since it waits for every in-progress response.
    """
    if seconds <= 0:
        return False
    disconnected = False
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal disconnected
            # The body is consumed already, so the next message can only be the disconnect.
            while (await request.receive())["type"] != "http.disconnect":
                pass
            disconnected = True
            group.cancel_scope.cancel()

        group.start_soon(watch)
        await anyio.sleep(seconds)
        group.cancel_scope.cancel()
    return disconnected


class _ChatHandler:
    """The state behind the route: settings, the seeded generator, the bearer and counters."""

    def __init__(
        self, settings: StubChatSettings, api_key: str | None, stats: StubChatStats
    ) -> None:
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.stats = stats
        # Taken when an answer is built: concurrent answers must not share an id.
        self._ids = itertools.count(1)
        # Only the expected header value is kept; the key itself is never logged.
        self._expected = f"Bearer {api_key}".encode() if api_key is not None else None

    def _authorized(self, request: Request) -> bool:
        if self._expected is None:
            return True
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, self._expected)

    async def endpoint(self, request: Request) -> Response:
        self.stats.requests += 1
        self.stats.in_flight += 1
        try:
            response = await self._handle(request)
        finally:
            self.stats.in_flight -= 1
        logger.debug("stub chat %s -> %d", request.url.path, response.status_code)
        return response

    async def _handle(self, request: Request) -> Response:
        if not self._authorized(request):
            self.stats.rejected += 1
            message = "Incorrect API key provided."
            return _error(401, message, "invalid_request_error", "invalid_api_key")
        try:
            body = await self._read_body(request)
            behaviour = parse_behaviour(request.headers.get(BEHAVIOUR_HEADER))
        except ValueError as exc:
            self.stats.rejected += 1
            return _error(400, str(exc), "invalid_request_error", None)
        plan = plan_request(self.settings, self.rng, behaviour)
        if await _wait_unless_disconnected(request, plan.delay):
            # Nobody will read the answer; uvicorn drops it. Counted apart from real outcomes.
            self.stats.disconnects += 1
            return _error(499, "client closed the request", "client_closed", None)
        if plan.outcome == "error":
            self.stats.errors += 1
            message = "The stub model failed on purpose (injected fault)."
            return _error(500, message, "server_error", "stub_injected_error")
        if plan.outcome == "wrong":
            self.stats.wrong_answers += 1
        self.stats.completions += 1
        reply = reply_for(body["messages"], plan.outcome, plan.delta)
        answer = self._answer(body, reply)
        if body.get("stream"):
            self.stats.streamed += 1
            return _event_stream(stream_events(answer, include_usage=_wants_usage(body)))
        return JSONResponse(completion_body(answer))

    @staticmethod
    async def _read_body(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise ValueError("the request body is not valid JSON") from None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise ValueError("'messages' must be a list of chat messages")
        # isinstance, not `in (True, False)`: 1 == True, and OpenAI takes only a boolean.
        if not isinstance(body.get("stream"), bool | None):
            raise ValueError("'stream' must be a boolean")
        if not isinstance(body.get("stream_options"), dict | None):
            raise ValueError("'stream_options' must be an object")
        return body

    def _answer(self, body: dict[str, Any], reply: str) -> Answer:
        model = body.get("model")
        prompt_tokens = sum(
            count_tokens(text_of(m.get("content"))) for m in body["messages"] if isinstance(m, dict)
        )
        return Answer(
            id=f"chatcmpl-stub-{next(self._ids):08d}",
            created=int(time.time()),
            model=model if isinstance(model, str) and model else DEFAULT_MODEL,
            reply=reply,
            prompt_tokens=prompt_tokens,
            completion_tokens=count_tokens(reply),
        )


def _wants_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _event_stream(events: list[str]) -> StreamingResponse:
    async def send() -> AsyncIterator[str]:
        for event in events:
            yield event

    # no-cache: a proxy in between must pass each event on, not hold the stream back.
    return StreamingResponse(
        send(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


def create_chat_app(
    settings: StubChatSettings | None = None, *, api_key: str | None = None
) -> Starlette:
    """The stub chat endpoint as an ASGI app; `app.state` holds `settings` and `stats`.

    With `api_key`, every chat request needs `Authorization: Bearer <api_key>` exactly.
    """
    if api_key is not None and not api_key.strip():
        raise ValueError("api_key must be non-empty when provided")
    settings = settings if settings is not None else StubChatSettings()
    stats = StubChatStats()
    handler = _ChatHandler(settings, api_key, stats)
    # Two routes: the path convertor needs at least one character, so the bare path is separate.
    routes = [
        Route("/chat/completions", handler.endpoint, methods=["POST"]),
        Route("/{base:path}/chat/completions", handler.endpoint, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.state.settings = settings
    app.state.stats = stats
    return app
