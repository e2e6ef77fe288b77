"""`create_rollout_server`: the rollout protocol over HTTP (PROTOCOL.md §2, §5)."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from core.types import (
    OBSERVED_STATUS_HEADER,
    POLLING_LEASE_HEADER,
    TERMINAL_STATUSES,
    CancelRolloutsRequest,
    RolloutInitRequest,
    RolloutResultResponse,
    RolloutStatus,
)
from server_stub.backend import ExecutionBackend, ExecutionRequest, classify_error
from server_stub.feeds import RolloutFeeds
from server_stub.hot_routes import HotRoutes
from server_stub.log_safety import LOG_SAFETY, server_logger
from server_stub.ownership import INSTANCE_ID_ENV
from server_stub.registry import InvalidLease, RolloutEntry, RolloutRegistry, UnknownRollout
from server_stub.results import encode_result, save_artifacts, shape_result
from server_stub.workflow import RolloutContext

logger = server_logger(__name__)

DEFAULT_RESULT_WAIT_TIMEOUT_SEC = 30.0
DEFAULT_POLLING_LEASE_TIMEOUT_SEC = 120.0
DEFAULT_RESULT_RETENTION_SEC = 900.0

# Shutdown: wait for work to finish, then cancel it, then force it (PROTOCOL.md §5.8).
DRAIN_WAIT_SEC = 10.0
CANCEL_WAIT_SEC = 120.0
FORCE_WAIT_SEC = 10.0

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[Any]]


class RolloutServer:
    """The state behind the routes: admission, the registry, the rollout tasks and the feeds."""

    def __init__(
        self,
        backend: ExecutionBackend,
        registry: RolloutRegistry,
        instance_id: str,
        process_id: str,
        feeds: RolloutFeeds,
    ) -> None:
        self.backend = backend
        self.registry = registry
        self.feeds = feeds
        self.instance_id = instance_id
        self.process_id = process_id
        self.accepting = True
        self.artifact_root = getattr(backend, "artifact_root", None)

    def health(self) -> dict[str, Any]:
        body = dict(self.backend.health())
        body["instance_id"] = self.instance_id
        body["process_id"] = self.process_id
        body["lifecycle"] = {
            "accepting_rollouts": self.accepting,
            "active_rollouts": self.registry.active,
        }
        return body

    def admit(self, request: RolloutInitRequest) -> Response:
        # No await between the checks and the task creation: admissions cannot interleave.
        if not self.accepting:
            return _detail(503, "rollout server is shutting down")
        if not self.backend.has_capacity():
            return _detail(429, "rollout queue is full; retry later", {"Retry-After": "5"})
        if request.rollout_id in self.registry.entries:
            return _detail(409, "rollout_id is already registered")
        context = RolloutContext(
            chat_completions_url=request.chat_completions_url,
            api_key=request.llm_api_key,
            rollout_id=request.rollout_id,
            process_id=self.process_id,
        )
        entry, token = self.registry.register(
            request.rollout_id, self.feeds.watch(request, context)
        )
        context.progress = entry.progress
        # Its key is masked in the log while its task runs: a chat endpoint refusing it may
        # quote it back into the workflow's exception, which is logged.
        release_key = LOG_SAFETY.hold(request.llm_api_key)
        try:
            task = asyncio.get_running_loop().create_task(self._run(entry, request, context))
        except BaseException:
            release_key()
            self.registry.discard(entry)
            raise
        # The rollout becomes `queued` for the feeds here: its task exists, the 202 is not sent.
        self.registry.bind(entry, task)
        # After the registry's own callback, which logs a task that crashed.
        task.add_done_callback(lambda _task: release_key())
        return Response(
            _admission_body(request.rollout_id, token, self.registry),
            status_code=202,
            media_type="application/json",
        )

    async def _run(
        self, entry: RolloutEntry, request: RolloutInitRequest, context: RolloutContext
    ) -> None:
        if not self.backend.reports_running:
            await entry.progress.set_status(RolloutStatus.RUNNING)
        execution = ExecutionRequest.model_construct(
            id=request.rollout_id,
            prompt=request.initial_messages,
            label=request.label,
            metadata=request.metadata,
            agent_timeout_sec=request.agent_timeout_sec,
            grader_timeout_sec=request.grader_timeout_sec,
            grade=request.grade,
        )
        try:
            with context:
                outcome = await self.backend.execute(execution)
        except asyncio.CancelledError:
            self.registry.publish(
                entry,
                RolloutResultResponse(
                    rollout_id=entry.rollout_id,
                    status=RolloutStatus.CANCELLED,
                    err_message="cancelled",
                ),
            )
            raise
        except Exception as exc:
            self.registry.publish(
                entry,
                RolloutResultResponse(
                    rollout_id=entry.rollout_id,
                    status=RolloutStatus.FAILURE,
                    err_message=str(exc) or "Internal server error",
                    err_category=classify_error(exc),
                ),
            )
            return
        if self.artifact_root is not None:
            await asyncio.to_thread(
                save_artifacts, self.artifact_root, request, outcome, self.process_id
            )
        self.registry.publish(entry, shape_result(entry.rollout_id, outcome.result))

    async def result_response(
        self, rollout_id: str, lease: str, observed: str | None, arrived: float
    ) -> Response:
        """`GET /rollout/{rollout_id}/result`: the long-poll (PROTOCOL.md §5.3). `observed`
        is the status the poller last saw; when that is stale the answer comes at once."""
        registry = self.registry
        try:
            entry = registry.lookup(rollout_id)
            registry.renew(entry, lease, arrived)
            if entry.result is None and observed in (None, entry.status.value):
                await registry.wait_for_change(entry)
                # Retention may have removed it meanwhile; the token is checked again either way.
                entry = registry.lookup(rollout_id)
                if not entry.lease.authenticate(lease):
                    raise InvalidLease(rollout_id)
        except UnknownRollout:
            return _detail(404, "unknown rollout_id")
        except InvalidLease:
            return _detail(403, "invalid polling lease")
        if entry.result is not None:
            body = entry.result_json
        else:
            body = encode_result(
                RolloutResultResponse.model_construct(
                    rollout_id=rollout_id,
                    status=entry.status,
                    sample=None,
                    err_message=None,
                    err_category=None,
                )
            )
        return Response(body, media_type="application/json")

    async def shutdown(self) -> None:
        self.accepting = False
        pending = self.registry.active_tasks()
        if pending:
            _, pending_set = await asyncio.wait(pending, timeout=DRAIN_WAIT_SEC)
            if pending_set:
                self.registry.cancel(self.registry.select(None, None, True))
                _, pending_set = await asyncio.wait(pending_set, timeout=CANCEL_WAIT_SEC)
            if pending_set:
                # Logged rather than printed: an embedded server shares stdout with `--json`.
                logger.warning("forcing %d rollout task(s) to stop", len(pending_set))
                for task in pending_set:
                    task.cancel()
                await asyncio.wait(pending_set, timeout=FORCE_WAIT_SEC)
        await self.backend.shutdown()
        self.registry.close()
        await self.feeds.close()


def _admission_body(rollout_id: str, token: str, registry: RolloutRegistry) -> bytes:
    return json.dumps(
        {
            "rollout_id": rollout_id,
            "status": RolloutStatus.QUEUED.value,
            "polling_lease_token": token,
            "result_wait_timeout_sec": registry.result_wait_timeout_sec,
            "polling_lease_timeout_sec": registry.polling_lease_timeout_sec,
        },
        separators=(",", ":"),
    ).encode()


def _json(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """`content` as JSON with non-ASCII characters escaped, as the admission body is: an answer
    that echoes what a client sent (a cancel's ids, a 422's input) may hold a lone surrogate,
    which JSON can spell and UTF-8 (Starlette's `JSONResponse`) cannot encode."""
    body = json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")
    return Response(body, status_code=status, headers=headers, media_type="application/json")


def _detail(status: int, detail: str, headers: dict[str, str] | None = None) -> Response:
    return _json({"detail": detail}, status, headers)


class BearerAuth:
    """Every request needs `Authorization: Bearer <key>`; runs before routing and validation."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            if not hmac.compare_digest(given, self.expected):
                await _detail(401, "unauthorized")(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _finite_only(value: Any) -> Any:
    """Non-finite numbers (sent as non-standard JSON literals) cannot be echoed back in JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite_only(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_only(v) for v in value]
    return value


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    # The official server answers 500 when the rejected input holds NaN/Infinity; we answer 422.
    return _json({"detail": _finite_only(jsonable_encoder(exc.errors()))}, 422)


def create_rollout_server(
    *,
    backend: ExecutionBackend,
    lifespan: Lifespan | None = None,
    configure_logging: bool = True,
    result_wait_timeout_sec: float = DEFAULT_RESULT_WAIT_TIMEOUT_SEC,
    polling_lease_timeout_sec: float = DEFAULT_POLLING_LEASE_TIMEOUT_SEC,
    result_retention_sec: float = DEFAULT_RESULT_RETENTION_SEC,
    api_key: str | None = None,
    otlp_endpoint: str | None = None,
    preview_root: str | os.PathLike[str] | None = None,
) -> FastAPI:
    """Build the rollout server app around `backend` (PROTOCOL.md §2.7).

    Our extensions, for in-process servers: `otlp_endpoint` (an OTLP/HTTP base URL) turns the
    ownership events on and `preview_root` (an absolute folder) the live previews (PROTOCOL.md
    §8). None, the default, reads `OSMOSIS_ROLLOUT_OTLP_ENDPOINT` and
    `_OSMOSIS_ROLLOUT_PREVIEW_ROOT` at server start, as the official server does; an empty
    string keeps that feed off whatever the environment says.
    """
    if api_key is not None and not api_key.strip():
        raise ValueError("api_key must be non-empty when provided")
    if not math.isfinite(result_wait_timeout_sec) or result_wait_timeout_sec <= 0:
        raise ValueError("result_wait_timeout_sec must be finite and greater than zero")
    if not math.isfinite(result_retention_sec) or result_retention_sec < 0:
        raise ValueError("result_retention_sec must be finite and non-negative")
    if not math.isfinite(polling_lease_timeout_sec) or polling_lease_timeout_sec <= 0:
        raise ValueError("timeout_sec must be finite and greater than zero")
    if polling_lease_timeout_sec <= result_wait_timeout_sec:
        raise ValueError("polling_lease_timeout_sec must exceed result_wait_timeout_sec")
    if configure_logging and not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO)
        # A line per chat call a workflow makes would drown the log and cost CPU per rollout.
        logging.getLogger("httpx").setLevel(logging.WARNING)

    def backend_cancel(rollout_id: str) -> str | None:
        answer = backend.cancel_rollouts(ids=[rollout_id]).get(rollout_id)
        if answer == "not_found":
            state = backend.rollout_status(rollout_id)
            status = state.get("status") if state else None
            if status not in TERMINAL_STATUSES:
                return None  # the backend does not know it yet: the server cancels its task
        return answer

    process_id = uuid.uuid4().hex
    registry = RolloutRegistry(
        result_wait_timeout_sec=float(result_wait_timeout_sec),
        polling_lease_timeout_sec=float(polling_lease_timeout_sec),
        result_retention_sec=float(result_retention_sec),
        backend_cancel=backend_cancel,
        encode_result=encode_result,
    )
    server = RolloutServer(
        backend,
        registry,
        os.environ.get(INSTANCE_ID_ENV) or process_id,
        process_id,
        RolloutFeeds(otlp_endpoint=otlp_endpoint, preview_root=preview_root),
    )

    @asynccontextmanager
    async def server_lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Masked in the log while the server runs (nothing logs it; a backend's message may
        # still quote it).
        release_api_key = LOG_SAFETY.hold(api_key)
        try:
            if lifespan is None:
                server.feeds.start()
                yield
                await server.shutdown()
                return
            async with lifespan(app):
                # After the application's own startup, which may set the feeds' variables.
                server.feeds.start()
                yield
                await server.shutdown()
        finally:
            release_api_key()

    app = FastAPI(
        title="osmosis-tui rollout server",
        lifespan=server_lifespan,
        exception_handlers={RequestValidationError: _validation_error},
    )
    app.state.rollout_server = server
    app.state.rollout_futures = registry.entries
    app.add_middleware(HotRoutes, server=server)
    if api_key is not None:  # added last, so it runs first
        app.add_middleware(BearerAuth, api_key=api_key)

    @app.get("/health")
    async def health() -> Response:
        return _json(server.health())

    @app.post("/rollout", status_code=202)
    async def start_rollout(body: RolloutInitRequest) -> Response:
        return server.admit(body)

    @app.get("/rollout/{rollout_id}/result")
    async def rollout_result(
        rollout_id: str,
        lease: Annotated[str, Header(alias=POLLING_LEASE_HEADER, min_length=1)],
        observed: Annotated[str | None, Header(alias=OBSERVED_STATUS_HEADER)] = None,
    ) -> Response:
        return await server.result_response(rollout_id, lease, observed, time.monotonic())

    @app.post("/rollout/cancel")
    async def cancel_rollouts(body: CancelRolloutsRequest) -> Response:
        selectors = (body.ids is not None) + (body.prefix is not None) + bool(body.all)
        if selectors != 1:
            raise HTTPException(422, "pass exactly one selector: ids, prefix, or all")
        selected = server.registry.select(body.ids, body.prefix, body.all)
        return _json({"dispositions": registry.cancel(selected)})

    return app
