"""The eval's model gateway (EVAL.md §4, PROTOCOL.md §9): rollouts call the model through it.

A loopback HTTP server, started with the run (`async with ModelGateway(upstream) as gw`).
Each rollout gets `chat_completions_url = gw.chat_completions_url(rollout_id)` and
`llm_api_key = gw.api_key`, a random bearer made for the run: it never sees the user's model
credentials. One route, as official:

    POST /v1/rollouts/{rollout_id}/chat/completions

- a missing or wrong bearer is 401 `{"detail": "Unauthorized"}`; an id that is not a single
  path segment 422 `{"detail": "invalid rollout_id"}`; a body that is not a JSON object 400
  `{"detail": "invalid body"}`;
- the requested `model` does not choose the model (integrations send `osmosis-rollout`): the
  upstream decides, and the answer echoes the requested name;
- `stream: false` → one `chat.completion`; `stream: true` → `text/event-stream`: `: ping`
  at once and every `heartbeat_sec` (15 s) while the upstream call runs, then one
  `chat.completion.chunk` with the whole message, `finish_reason` and `usage`, then
  `data: [DONE]`; an error after the stream began is an `event: error` before `[DONE]`;
- an upstream failure is an OpenAI-style error body (`gateway_payloads.error_payload`) with
  the upstream's 4xx status, 408 for a timeout, else 502;
- the bearer and the rollout id are checked from the request's head, before a byte of its
  body is read (`RouteApp`): a stranger's body is never held, its connection is closed;
- before that, the listener holds every connection to `http_limits`
  (`core.serving.http_limits`): a request head too big, with too many headers or too slow to
  arrive is 431 or 408, a body not in within its deadline 408, and past its connection limit
  503. A body's size is not bounded: a chat call carries the whole conversation.

Behind an `advertise_url` (a proxy or tunnel with idle-read timeouts), a non-streaming call
still pending after 90 s is answered 200 at once and kept warm with a space every 30 s until
its body (or error object) is ready, as official.

Every call is recorded as a `ModelCall` handed to the `on_call_start` and `on_call_end` hooks;
the gateway itself keeps only what the run needs back: per rollout, the sum of
`usage.total_tokens` (`tokens_for`), and the calls in flight (`in_flight`). The run's bearer
and the upstream's keys are masked in every record, error and log line, before `redact`;
successful answers are passed on as the model gave them, as official.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from core.eval.gateway.asgi_app import (
    ROUTE_PREFIX,
    ROUTE_SUFFIX,
    Refusal,
    RouteApp,
    RouteRequest,
    end_stream,
    send_empty,
    send_json,
    send_piece,
    start_stream,
    watch_departure,
)
from core.eval.gateway.errors import GatewayError, UpstreamError
from core.eval.gateway.payloads import (
    SSE_DONE,
    SSE_PING,
    answer_payload,
    choices,
    compact_json,
    error_message,
    error_payload,
    last_message_text,
    read_usage,
    reasoning_fields,
    reply_message,
    reply_text,
    sse_data,
    sse_error,
)
from core.eval.gateway.reasoning_memory import ReasoningMemory
from core.eval.gateway.upstreams import ChatUpstream, ambient_secret_values
from core.eval.redact import Redactor
from core.eval.results.calls import CallHook, ModelCall, bounded
from core.eval.safe_text import terminal_safe
from core.eval.token_counts import NOT_A_COUNT
from core.eval.untrusted_json import load_json
from core.serving.asgi import Headers, header_text
from core.serving.http_limits import HttpLimits
from core.serving.loopback import (
    HTTP_LIMITS,
    LoopbackServer,
    LoopbackService,
    listener_options,
)
from core.task_end import cancel_and_wait
from core.types import ensure_single_path_segment

logger = logging.getLogger(__name__)

ROUTE = f"{ROUTE_PREFIX}{{rollout_id}}{ROUTE_SUFFIX}"
#: As official: a comment this often while the upstream call runs.
HEARTBEAT_SEC = 15.0
#: As official, behind an `advertise_url`: how long a non-streaming answer may stay pending
#: before its 200 is committed, and how often a space keeps it warm after that.
KEEPALIVE_GRACE_SEC = 90.0
KEEPALIVE_INTERVAL_SEC = 30.0
_SSE_TYPE = "text/event-stream; charset=utf-8"
_SSE_HEADERS = ((b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no"))

Call = asyncio.Future[tuple[int, dict[str, Any]]]


class ModelGateway(LoopbackService):
    """The run's model gateway; see the module docstring. An async context manager."""

    service_name = "the model gateway"
    bind_error = GatewayError

    def __init__(
        self,
        upstream: ChatUpstream,
        *,
        listener_port: int | None = None,
        advertise_url: str | None = None,
        redact: Callable[[str], str] | None = None,
        on_call_start: CallHook | None = None,
        on_call_end: CallHook | None = None,
        forward_headers: Collection[str] = (),
        heartbeat_sec: float = HEARTBEAT_SEC,
        keepalive: bool | None = None,
        keepalive_grace_sec: float = KEEPALIVE_GRACE_SEC,
        keepalive_interval_sec: float = KEEPALIVE_INTERVAL_SEC,
        shutdown_grace_sec: int = 2,
        http_limits: HttpLimits = HTTP_LIMITS,
        price: Callable[[int | None, int | None], float | None] | None = None,
    ) -> None:
        """`listener_port` None or 0 picks a free port; `advertise_url` replaces the base of
        the URLs given to rollouts (it may be set later, once a tunnel knows its address);
        `redact` masks the session's secrets in records and errors, after the gateway's own
        (its bearer, the upstream's keys, and the credential-looking environment values as
        they are now);
        `forward_headers` are request headers passed on to the upstream (the demo's
        `X-Stub-Behaviour`); `keepalive` (default: on with an `advertise_url`) keeps slow
        non-streaming answers warm; `shutdown_grace_sec` bounds how long stopping waits for
        calls still in flight before they are cancelled; `http_limits` bounds what one
        connection may make the listener hold (request heads, connections); `price` gives a
        call's cost from its prompt and completion tokens (`--price-per-mtok`, or a price
        table's), in place of the upstream's own (LiteLLM's)."""
        self._upstream = upstream
        self._port = listener_port or 0
        self.advertise_url = advertise_url
        self._bearer = secrets.token_urlsafe(32)
        own = Redactor([self._bearer, *upstream.secrets, *ambient_secret_values()])
        self._scrub: Callable[[str], str] = (
            own.redact if redact is None else (lambda text: redact(own.redact(text)))
        )
        self._on_start = on_call_start
        self._on_end = on_call_end
        self._price = price
        self._forward = tuple(dict.fromkeys(name.lower() for name in forward_headers))
        self._heartbeat = heartbeat_sec
        self._keepalive = advertise_url is not None if keepalive is None else keepalive
        self._grace = keepalive_grace_sec
        self._keepalive_interval = keepalive_interval_sec
        self._ids = 0
        self._calls: dict[int, ModelCall] = {}
        self._tokens: dict[str, int] = {}
        self._reasoning = ReasoningMemory()
        self._app = RouteApp(self._endpoint, self._head_refusal)
        self._listener = LoopbackServer(
            self._app,
            port=self._port,
            limits=http_limits,
            **listener_options(shutdown_grace_sec),
        )

    # -- what the run reads --------------------------------------------------------------
    @property
    def api_key(self) -> str:
        """The run's bearer: every rollout's `llm_api_key`. Never log it."""
        return self._bearer

    @property
    def base_url(self) -> str:
        """The loopback address the gateway listens on (`http://127.0.0.1:PORT`)."""
        if self._listener.base_url is None:
            raise GatewayError("the model gateway is not running")
        return self._listener.base_url

    def chat_completions_url(self, rollout_id: str) -> str:
        """The rollout's `chat_completions_url` (clients append `/chat/completions`)."""
        base = (self.advertise_url or self.base_url).rstrip("/")
        return f"{base}/v1/rollouts/{quote(rollout_id, safe='')}"

    def tokens_for(self, rollout_id: str) -> int | None:
        """Σ `usage.total_tokens` of the rollout's answered calls; None if none reported usage."""
        return self._tokens.get(rollout_id)

    @property
    def in_flight(self) -> tuple[ModelCall, ...]:
        """The calls waiting for their upstream now, oldest first."""
        return tuple(self._calls.values())

    def forget(self, rollout_id: str) -> None:
        """Drop what is kept for a rollout that is over (its token sum, its reasoning)."""
        self._tokens.pop(rollout_id, None)
        self._reasoning.forget(rollout_id)

    # -- the route -----------------------------------------------------------------------
    def _head_refusal(self, rollout_id: str, headers: Headers) -> Refusal | None:
        """The bearer and the rollout id, checked from the request's head: a stranger's body
        is never read (`RouteApp`)."""
        scheme, _, credentials = (header_text(headers, b"authorization") or "").partition(" ")
        if not (
            scheme.lower() == "bearer"
            and secrets.compare_digest(credentials.encode(), self._bearer.encode())
        ):
            return 401, {"detail": "Unauthorized"}
        try:
            ensure_single_path_segment(rollout_id)
        except ValueError:
            return 422, {"detail": "invalid rollout_id"}
        return None

    async def _endpoint(self, request: RouteRequest) -> None:
        send = request.send
        rollout_id = request.rollout_id
        try:
            body = load_json(request.body)
        except ValueError:  # not JSON, or nested too deeply to parse
            body = None
        if not isinstance(body, dict):
            await send_json(send, 400, {"detail": "invalid body"})
            return
        streamed = bool(body.get("stream", False))
        requested_model = str(body.get("model") or self._upstream.model_path)
        headers = {
            name: value
            for name in self._forward
            if (value := request.header(name.encode("latin-1"))) is not None
        }

        def call() -> Call:
            return asyncio.ensure_future(
                self._complete(rollout_id, body, streamed, requested_model, headers)
            )

        if streamed:
            await self._events(request, call)
        else:
            await self._answer(request, call())

    async def _answer(self, request: RouteRequest, task: Call) -> None:
        """The non-streaming answer: the upstream call raced against the rollout leaving."""
        gone = watch_departure(request)
        try:
            racing: set[asyncio.Future[Any]] = {task, gone}
            done, _ = await asyncio.wait(
                racing,
                timeout=self._grace if self._keepalive else None,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if task in done:
                status, payload = task.result()
                await send_json(request.send, status, payload)
            elif gone in done:  # nobody is left to read an answer
                await cancel_and_wait(task)
                await send_empty(request.send, 499)
            else:
                await self._trickle(request, task, gone)
        except BaseException:
            await cancel_and_wait(task)
            raise
        finally:
            await cancel_and_wait(gone)

    async def _trickle(self, request: RouteRequest, task: Call, gone: asyncio.Future[None]) -> None:
        """A committed 200 kept warm with whitespace (legal before JSON) until the body."""
        send = request.send
        await start_stream(send, "application/json")
        await send_piece(send, " ")
        racing: set[asyncio.Future[Any]] = {task, gone}
        while True:
            done, _ = await asyncio.wait(
                racing, timeout=self._keepalive_interval, return_when=asyncio.FIRST_COMPLETED
            )
            if gone in done:
                await cancel_and_wait(task)
                return
            if task in done:
                break
            await send_piece(send, " ")
        await send_piece(send, compact_json(task.result()[1]))
        await end_stream(send)

    async def _events(self, request: RouteRequest, call: Callable[[], Call]) -> None:
        send = request.send
        await start_stream(send, _SSE_TYPE, _SSE_HEADERS)
        await send_piece(send, SSE_PING)
        task = call()
        gone = watch_departure(request)
        racing: set[asyncio.Future[Any]] = {task, gone}
        try:
            while True:
                done, _ = await asyncio.wait(
                    racing, timeout=self._heartbeat, return_when=asyncio.FIRST_COMPLETED
                )
                if gone in done:
                    return  # the finally cancels the upstream call
                if task in done:
                    break
                await send_piece(send, SSE_PING)
            status, payload = task.result()
            await send_piece(send, sse_data(payload) if status == 200 else sse_error(payload))
            await send_piece(send, SSE_DONE)
            await end_stream(send)
        finally:
            await cancel_and_wait(task)
            await cancel_and_wait(gone)

    # -- one call ------------------------------------------------------------------------
    async def _complete(
        self,
        rollout_id: str,
        body: Mapping[str, Any],
        streamed: bool,
        requested_model: str,
        headers: Mapping[str, str],
    ) -> tuple[int, dict[str, Any]]:
        """The upstream call for one request, recorded; the status and body to answer with."""
        # The id is the caller's text: escaped in log lines, so a line break cannot forge one.
        shown_id = terminal_safe(rollout_id)
        self._ids += 1
        call = ModelCall(
            call_id=self._ids,
            rollout_id=rollout_id,
            streamed=streamed,
            requested_model=requested_model,
            started_at=time.time(),
            started_monotonic=time.monotonic(),
            request_text=bounded(self._scrub(last_message_text(body))),
        )
        self._calls[call.call_id] = call
        self._emit(self._on_start, call)
        try:
            reply = await self._upstream.complete(
                self._reasoning.replayed(rollout_id, body), headers=headers
            )
            usage = read_usage(reply.completion)
            if usage is not None and usage.ignored:
                logger.warning(
                    "model call for rollout %s: %s %s; counted as unknown",
                    shown_id,
                    ", ".join(usage.ignored),
                    NOT_A_COUNT,
                )
            if usage is not None and usage.total_tokens is not None:
                self._tokens[rollout_id] = self._tokens.get(rollout_id, 0) + usage.total_tokens
            found = choices(reply.completion)
            if not found:
                raise UpstreamError(
                    "the model answered with no choices", status=reply.status, answer=502
                )
        except UpstreamError as exc:
            message = self._scrub(exc.message)
            logger.warning("model call for rollout %s failed: %s", shown_id, message)
            self._end(call, status=exc.answer, upstream_status=exc.status, error=message)
            return exc.answer, error_payload(exc.answer, message)
        except asyncio.CancelledError:
            self._end(call, error="abandoned: the rollout left or the gateway stopped")
            raise
        except Exception as exc:  # a fault of ours or a library's: still an answer, and logged
            message = self._scrub(error_message(f"{type(exc).__name__}: {exc}"))
            logger.error("model call for rollout %s failed unexpectedly: %s", shown_id, message)
            self._end(call, status=502, error=message)
            return 502, error_payload(502, message)
        prompt_tokens = None if usage is None else usage.prompt_tokens
        completion_tokens = None if usage is None else usage.completion_tokens
        cost = reply.cost_usd
        if self._price is not None:
            cost = self._price(prompt_tokens, completion_tokens)
        for choice in found:
            message_fields = reply_message(choice)
            self._reasoning.remember(rollout_id, message_fields, reasoning_fields(message_fields))
        self._end(
            call,
            status=200,
            upstream_status=reply.status,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=None if usage is None else usage.total_tokens,
            reply_text=bounded(self._scrub(reply_text(reply.completion))),
            cost_usd=cost,
        )
        return 200, answer_payload(
            reply.completion, requested_model=requested_model, stream=streamed
        )

    def _end(self, call: ModelCall, **outcome: Any) -> None:
        self._calls.pop(call.call_id, None)
        ended = replace(call, ended_at=time.time(), ended_monotonic=time.monotonic(), **outcome)
        self._emit(self._on_end, ended)

    @staticmethod
    def _emit(hook: CallHook | None, call: ModelCall) -> None:
        if hook is None:
            return
        # A broken observer (the board, a full disk under calls.jsonl) must not fail the
        # rollout's model call; it is logged instead.
        try:
            hook(call)
        except Exception:
            logger.exception("a model-call hook failed (call %d)", call.call_id)


__all__ = ["HEARTBEAT_SEC", "ROUTE", "ModelGateway"]
