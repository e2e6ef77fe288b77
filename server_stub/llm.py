"""A stub OpenAI-compatible chat endpoint: deterministic answers, latency and fault knobs.

`create_chat_app()` builds a Starlette app that answers `POST <any base path>/chat/completions`
(so per-rollout base URLs such as `http://127.0.0.1:P/v1/rollouts/<id>` work unchanged) with
the OpenAI response shape. What it answers comes from `server_stub.llm_answers` (the number
that solves the arithmetic question in the last user message); how and when, from the knobs in
`server_stub.llm_behaviour` (settings plus the per-request `X-Stub-Behaviour` header) and the
latency models in `server_stub.llm_latency`.

Waits end early when the client goes away, so an abandoned call never holds up shutdown.
"""

from __future__ import annotations

import hmac
import itertools
import logging
import random
import time
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from server_stub.llm_answers import count_tokens, reply_for, text_of
from server_stub.llm_behaviour import (
    BEHAVIOUR_HEADER,
    StubChatSettings,
    parse_behaviour,
    plan_request,
)

logger = logging.getLogger(__name__)

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
    in_flight: int = 0


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

    async def endpoint(self, request: Request) -> JSONResponse:
        self.stats.requests += 1
        self.stats.in_flight += 1
        try:
            response = await self._handle(request)
        finally:
            self.stats.in_flight -= 1
        logger.debug("stub chat %s -> %d", request.url.path, response.status_code)
        return response

    async def _handle(self, request: Request) -> JSONResponse:
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
        return JSONResponse(self._completion(body, reply))

    @staticmethod
    async def _read_body(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise ValueError("the request body is not valid JSON") from None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise ValueError("'messages' must be a list of chat messages")
        if body.get("stream"):
            raise ValueError("the stub does not support streaming; send stream=false")
        return body

    def _completion(self, body: dict[str, Any], reply: str) -> dict[str, Any]:
        model = body.get("model")
        prompt_tokens = sum(
            count_tokens(text_of(m.get("content"))) for m in body["messages"] if isinstance(m, dict)
        )
        completion_tokens = count_tokens(reply)
        return {
            "id": f"chatcmpl-stub-{next(self._ids):08d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model if isinstance(model, str) and model else DEFAULT_MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


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
