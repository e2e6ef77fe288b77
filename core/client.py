"""`RolloutClient`: admission, cancellation and health of a rollout server (PROTOCOL.md §6.1).

Same names, parameters, numbers and messages as `osmosis_ai.rollout.client` 0.3.8, so code
written against the official client runs against this one by changing one import. Additions
that cannot break a caller: `async with RolloutClient(...)`, and `RolloutHandle` extras (see
`core.handle`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx

from core.async_closing import AsyncClosing
from core.errors import RolloutAdmissionTimeoutError, RolloutProtocolError
from core.handle import RolloutHandle
from core.transport import AiohttpTransport, Exchange
from core.types import (
    CancelRolloutsRequest,
    CancelRolloutsResponse,
    MessageDict,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutLifecycle,
    RolloutResultResponse,
)
from core.wire import DirectWire, HttpxWire, Wire

# 429 handling (§5.6): the server's Retry-After, kept within these bounds, else a fixed fallback.
RETRY_AFTER_MIN_SEC = 0.05
RETRY_AFTER_MAX_SEC = 60.0
RETRY_AFTER_DEFAULT_SEC = 1.0

# POST /rollout/cancel: an httpx timeout per phase, plus a wall-clock bound over the whole call,
# because httpx's timeouts do not cover waiting for a pooled connection.
CANCEL_HTTP_TIMEOUT_SEC = 5.0
CANCEL_WALL_TIMEOUT_SEC = 5.0

# wait_idle retries health reads that failed with these statuses (proxies, restarts, overload).
_WAIT_IDLE_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

_MAY_HAVE_SUCCEEDED = (
    "; admission may have succeeded; the server requests cancellation "
    "when an unobserved rollout's polling lease expires"
)

_JSON_CONTENT = {"Content-Type": "application/json"}

# What `httpx.AsyncClient()` gets (and so what the official client's own client has).
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
DEFAULT_TIMEOUT = httpx.Timeout(5.0)


def retry_after_seconds(response: httpx.Response | Exchange) -> float:
    """The wait a 429 asks for: `Retry-After` in seconds, clamped; 1 s when absent or odd."""
    raw = response.headers.get("Retry-After")
    if raw is None:
        return RETRY_AFTER_DEFAULT_SEC
    try:
        value = float(raw)
    except ValueError:
        # An HTTP-date is legal in Retry-After but no rollout server sends one.
        return RETRY_AFTER_DEFAULT_SEC
    if not math.isfinite(value):
        return RETRY_AFTER_DEFAULT_SEC
    return min(max(value, RETRY_AFTER_MIN_SEC), RETRY_AFTER_MAX_SEC)


def _admission(response: Exchange, rollout_id: str) -> RolloutInitResponse:
    """Validate a non-429 answer to POST /rollout."""
    status = response.status
    if status != 202:
        raise RolloutProtocolError(
            f"POST /rollout returned {status}; only 202 and 429 are accepted", status_code=status
        )
    try:
        admission = RolloutInitResponse.model_validate_json(response.content)
    except ValueError as exc:
        raise RolloutProtocolError(
            "POST /rollout returned an invalid response", status_code=status
        ) from exc
    if admission.rollout_id != rollout_id:
        raise RolloutProtocolError(
            "POST /rollout returned a different rollout_id", status_code=status
        )
    return admission


class _Attempt:
    """Whether an admission POST is on the wire: decides what an admission timeout means."""

    __slots__ = ("in_flight",)

    def __init__(self) -> None:
        self.in_flight = False


class RolloutClient(AsyncClosing):
    """Talks to one rollout server; `run_rollout_async` returns a polling `RolloutHandle`.

    Keep the client open until every handle it created is done: handles poll through it.
    """

    def __init__(
        self,
        *,
        url: str,
        http_client: httpx.AsyncClient | None = None,
        admission_timeout_sec: float | None = None,
        api_key: str | None = None,
        limits: httpx.Limits | None = None,
        timeout: httpx.Timeout | None = None,
    ) -> None:
        """As official, plus (ours) `limits` and `timeout` for the client this one makes when
        no `http_client` is given (httpx's defaults otherwise: 100 connections, 5 s)."""
        if admission_timeout_sec is not None and not math.isfinite(admission_timeout_sec):
            raise ValueError("admission_timeout_sec must be finite; omit it to wait unbounded")
        if api_key is not None and not api_key.strip():
            raise ValueError("api_key must be non-empty when provided")
        self.url: str = url.rstrip("/")
        self.owns_http_client: bool = http_client is None
        self.wire: Wire
        """How admissions and polls are sent (`core.wire`): straight through the transport
        of a client made here, else through the caller's client as it is."""
        if http_client is None:
            limits = limits or DEFAULT_LIMITS
            transport = AiohttpTransport(limits=limits)
            http_client = httpx.AsyncClient(
                transport=transport, limits=limits, timeout=timeout or DEFAULT_TIMEOUT
            )
            self.wire = DirectWire(transport, http_client.timeout)
        else:
            self.wire = HttpxWire(http_client)
        self.http_client: httpx.AsyncClient = http_client
        self.busy_answers: int = 0
        """(Ours) how often the server answered an admission 429 (busy: retried after its
        Retry-After), for a front end's account of each server."""
        self.admission_timeout_sec: float | None = admission_timeout_sec
        # Built once: every request carries them, and handles copy them into their own headers.
        self.auth_headers: dict[str, str] = (
            {"Authorization": f"Bearer {api_key}"} if api_key is not None else {}
        )
        self._post_headers = httpx.Headers({**self.auth_headers, **_JSON_CONTENT})
        self._get_headers = httpx.Headers(self.auth_headers)
        self._admission_request = self.wire.prepare(f"{self.url}/rollout", self._post_headers)
        self._cancel_url = httpx.URL(f"{self.url}/rollout/cancel")
        self._health_url = httpx.URL(f"{self.url}/health")

    async def aclose(self) -> None:
        """Close the HTTP client if this client created it; a supplied one stays open."""
        if self.owns_http_client:
            await self.http_client.aclose()

    # -- rollouts --------------------------------------------------------------------------

    # Positional parameters in this order are part of the official signature.
    async def run_rollout(  # noqa: PLR0917
        self,
        initial_messages: list[MessageDict],
        chat_completions_url: str,
        rollout_id: str,
        llm_api_key: str | None = None,
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
        grade: bool = True,
        agent_timeout_sec: float | None = None,
        grader_timeout_sec: float | None = None,
        extra_fields: dict[str, Any] | None = None,
    ) -> RolloutResultResponse:
        """Admit a rollout and wait for its terminal `RolloutResultResponse`."""
        handle = await self.run_rollout_async(
            initial_messages,
            chat_completions_url,
            rollout_id,
            llm_api_key,
            label,
            metadata,
            grade,
            agent_timeout_sec,
            grader_timeout_sec,
            extra_fields,
        )
        return await handle

    async def run_rollout_async(  # noqa: PLR0917
        self,
        initial_messages: list[MessageDict],
        chat_completions_url: str,
        rollout_id: str,
        llm_api_key: str | None = None,
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
        grade: bool = True,
        agent_timeout_sec: float | None = None,
        grader_timeout_sec: float | None = None,
        extra_fields: dict[str, Any] | None = None,
        *,
        on_change: Callable[[RolloutHandle], None] | None = None,
        observe_every_status: bool = True,
    ) -> RolloutHandle:
        """Admit a rollout (retrying 429s) and return its handle, already polling.

        `on_change` and `observe_every_status` (our additions) are passed to the handle; see
        `RolloutHandle`.
        """
        # Validated here with the server's own validators, so a bad request never leaves.
        request = RolloutInitRequest(
            initial_messages=initial_messages,
            label=label,
            metadata=metadata,
            rollout_id=rollout_id,
            chat_completions_url=chat_completions_url,
            llm_api_key=llm_api_key,
            grade=grade,
            agent_timeout_sec=agent_timeout_sec,
            grader_timeout_sec=grader_timeout_sec,
            extra_fields=extra_fields,
        )
        # The model's field order is the official key order, and unset fields go out as null.
        body = request.model_dump_json().encode()
        timeout = self.admission_timeout_sec
        attempt = _Attempt()
        if timeout is None:
            admission, started = await self._admit(rollout_id, body, attempt)
        else:
            try:
                with anyio.fail_after(timeout) as scope:
                    admission, started = await self._admit(rollout_id, body, attempt)
            except TimeoutError as exc:
                if not scope.cancelled_caught:
                    raise  # a TimeoutError of the transport's own, not the deadline
                message = f"admission for rollout {rollout_id} timed out after {timeout} seconds"
                if attempt.in_flight:
                    # The lost answer may be an acceptance (or a duplicate-id rejection), so
                    # nothing is cancelled here: cancelling by id could stop someone else's work.
                    message += _MAY_HAVE_SUCCEEDED
                raise RolloutAdmissionTimeoutError(message) from exc
        return RolloutHandle(
            self,
            admission,
            lease_deadline=started + admission.polling_lease_timeout_sec,
            grade=grade,
            on_change=on_change,
            observe_every_status=observe_every_status,
        )

    async def _admit(
        self, rollout_id: str, body: bytes, attempt: _Attempt
    ) -> tuple[RolloutInitResponse, float]:
        """POST until the server answers something other than 429.

        Returns the admission and the start time of the POST that got it: the server's lease
        started no earlier than that. Transport errors are not retried, because the request
        may have been accepted.
        """
        while True:
            attempt.in_flight = True
            started = time.monotonic()
            response = await self.wire.send("POST", self._admission_request, body)
            attempt.in_flight = False
            if response.status != 429:
                return _admission(response, rollout_id), started
            self.busy_answers += 1
            await asyncio.sleep(retry_after_seconds(response))

    async def cancel_rollout(self, rollout_id: str) -> CancelRolloutsResponse:
        """Ask the server to cancel one rollout; its handle then observes `cancelled`."""
        body = CancelRolloutsRequest(ids=[rollout_id]).model_dump_json().encode()
        with anyio.fail_after(CANCEL_WALL_TIMEOUT_SEC):
            response = await self.http_client.post(
                self._cancel_url,
                content=body,
                headers=self._post_headers,
                timeout=CANCEL_HTTP_TIMEOUT_SEC,
                follow_redirects=False,
            )
        status = response.status_code
        if status != 200:
            raise RolloutProtocolError(
                f"POST /rollout/cancel returned {status}", status_code=status
            )
        try:
            return CancelRolloutsResponse.model_validate_json(response.content)
        except ValueError as exc:
            raise RolloutProtocolError(
                "POST /rollout/cancel returned an invalid response", status_code=status
            ) from exc

    # -- server state ----------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """GET /health as a dict; no backend-specific key is assumed."""
        response = await self.http_client.get(
            self._health_url, headers=self._get_headers, follow_redirects=False
        )
        if response.status_code != 200:
            raise RolloutProtocolError("GET /health failed", status_code=response.status_code)
        try:
            value = response.json()
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise RolloutProtocolError(
                "GET /health returned invalid JSON", status_code=200
            ) from exc
        if not isinstance(value, dict):
            raise RolloutProtocolError("GET /health returned invalid JSON", status_code=200)
        return value

    async def wait_idle(
        self,
        *,
        timeout_sec: float = 120,
        poll_interval_sec: float = 1,
        process_id: str | None = None,
    ) -> dict[str, Any]:
        """Poll /health until no rollout task is active; returns that health body.

        Admissions are not stopped meanwhile. A server that reports no identity or lifecycle
        is rejected rather than judged from backend counters, and a changed `process_id` (a
        restart: the old rollouts are gone, not finished) fails the wait.
        """
        for value in (timeout_sec, poll_interval_sec):
            if not math.isfinite(value) or value <= 0:
                raise ValueError("wait timeouts must be positive and finite")
        with anyio.fail_after(timeout_sec):
            while True:
                try:
                    health = await self.health()
                except RolloutProtocolError as exc:
                    if exc.status_code not in _WAIT_IDLE_RETRY_STATUSES:
                        raise
                    await asyncio.sleep(poll_interval_sec)
                    continue
                except httpx.TransportError:
                    await asyncio.sleep(poll_interval_sec)
                    continue
                current = health.get("process_id")
                if not isinstance(current, str) or not current:
                    raise RolloutProtocolError("Server has no lifecycle identity", status_code=200)
                if process_id is not None and current != process_id:
                    raise RolloutProtocolError("Server restarted while waiting", status_code=200)
                process_id = current
                try:
                    lifecycle = RolloutLifecycle.model_validate(health.get("lifecycle"))
                except ValueError as exc:
                    raise RolloutProtocolError(
                        "Server has no valid lifecycle state", status_code=200
                    ) from exc
                if lifecycle.active_rollouts == 0:
                    return health
                await asyncio.sleep(poll_interval_sec)


__all__ = [
    "RolloutAdmissionTimeoutError",
    "RolloutClient",
    "RolloutHandle",
    "RolloutProtocolError",
    "retry_after_seconds",
]
