"""The model gateway's HTTP side as a bare ASGI app: one POST route, JSON and event-stream
answers, and the rollout's departure noticed while it waits.

Every model call of a run passes here, so it does without a framework (`core.serving.asgi`): a
Starlette route, request and response cost about as much CPU per call as the rest of the
gateway together.
What it answers outside the route is what Starlette answered (the official bridge's
FastAPI does the same): 404 `{"detail": "Not Found"}` for another path, a 307 to the path
without its trailing slash, 405 `{"detail": "Method Not Allowed"}` (with `Allow: POST`) for
another method.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from core.serving.asgi import (
    Disconnected,
    Header,
    Headers,
    Receive,
    Scope,
    Send,
    header_text,
    read_body,
    request_headers,
    send_whole,
)

ROUTE_PREFIX = "/v1/rollouts/"
ROUTE_SUFFIX = "/chat/completions"
_JSON = (b"content-type", b"application/json")


@dataclass(frozen=True)
class RouteRequest:
    """A request for the route, its body read."""

    rollout_id: str
    """The path segment, percent-decoded (as a Starlette path parameter)."""
    headers: Headers
    """Lower-case names; the first value of a repeated header (as Starlette reads them)."""
    body: bytes
    receive: Receive
    send: Send

    def header(self, name: bytes) -> str | None:
        return header_text(self.headers, name)


Handler = Callable[[RouteRequest], Awaitable[None]]
#: A refusal told by a request's head alone: its status and JSON body.
Refusal = tuple[int, dict[str, Any]]
#: What a request's path segment and headers say before its body is read: a refusal, or None.
HeadCheck = Callable[[str, Headers], Refusal | None]


def _segment(path: str) -> str | None:
    if not (path.startswith(ROUTE_PREFIX) and path.endswith(ROUTE_SUFFIX)):
        return None
    segment = path[len(ROUTE_PREFIX) : -len(ROUTE_SUFFIX)]
    return segment if segment and "/" not in segment else None


class RouteApp:
    """`POST /v1/rollouts/{rollout_id}/chat/completions` → `handler`, which answers through
    the senders below.

    `check` sees the request's head first (its bearer, its path segment): what it refuses is
    answered before a byte of the body is read, and the connection closed, so a stranger's
    body (however large, however slow) is never held.
    """

    def __init__(self, handler: Handler, check: HeadCheck) -> None:
        self._handler = handler
        self._check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no lifespan (off) and no WebSocket (`HttpLimits`): nothing else comes
        path: str = scope["path"]
        segment = _segment(path)
        if segment is None:
            if path != "/" and path.endswith("/") and _segment(path[:-1]) is not None:
                await _redirect(scope, send, path[:-1])
            else:
                await send_json(send, 404, {"detail": "Not Found"})
            return
        if scope["method"] != "POST":
            await send_json(send, 405, {"detail": "Method Not Allowed"}, [(b"allow", b"POST")])
            return
        headers = request_headers(scope)
        refusal = self._check(segment, headers)
        if refusal is not None:
            # The body stays unread; closing is what stops the client sending the rest.
            status, payload = refusal
            await send_json(send, status, payload, [(b"connection", b"close")])
            return
        try:
            body = await read_body(receive)
        except Disconnected:
            return  # gone before its body arrived: nobody to answer
        answering = _Answering(send)
        try:
            await self._handler(RouteRequest(segment, headers, body, receive, answering.send))
        except asyncio.CancelledError:
            # uvicorn cancels the calls still answering when the run stops its gateway (its
            # graceful shutdown timed out: a rollout left in flight on an interrupt). That is
            # the end of the call, not a fault: the rollout gets an end, and the terminal a
            # traceback per call from uvicorn's "Exception in ASGI application" no more.
            await answering.end_at_shutdown()


class _Answering:
    """`send`, and how far the answer it carries has gone: what a call cut short by the
    gateway stopping still owes its caller."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.complete = False

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self._send(message)

    async def end_at_shutdown(self) -> None:
        """A 503 when nothing was answered yet, the end of the body when part was; the
        connection may be gone already, and then there is nobody to tell."""
        try:
            if not self.started:
                body = json.dumps({"error": {"message": "the eval stopped its model gateway"}})
                await send_whole(self._send, 503, body.encode(), [_JSON])
            elif not self.complete:
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception:
            return


async def _redirect(scope: Scope, send: Send, path: str) -> None:
    host = next((v for k, v in scope["headers"] if k == b"host"), b"").decode("latin-1")
    if not host:
        server_host, server_port = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server_host}:{server_port}"
    query = scope.get("query_string", b"")
    location = f"{scope.get('scheme', 'http')}://{host}{path}" + (
        f"?{query.decode('latin-1')}" if query else ""
    )
    await send_whole(send, 307, b"", [(b"location", location.encode("latin-1"))])


def encode_json(payload: Any) -> bytes:
    """As Starlette's `JSONResponse` renders it."""
    return json.dumps(
        payload, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode()


async def send_json(send: Send, status: int, payload: Any, headers: Iterable[Header] = ()) -> None:
    await send_whole(send, status, encode_json(payload), [_JSON, *headers])


async def send_empty(send: Send, status: int) -> None:
    await send_whole(send, status, b"")


async def start_stream(send: Send, media_type: str, headers: Iterable[Header] = ()) -> None:
    """A 200 whose body follows in pieces (`send_piece`, then `end_stream`)."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", media_type.encode("latin-1")), *headers],
        }
    )


async def send_piece(send: Send, text: str) -> None:
    await send({"type": "http.response.body", "body": text.encode(), "more_body": True})


async def end_stream(send: Send) -> None:
    await send({"type": "http.response.body", "body": b""})


async def disconnected(receive: Receive) -> None:
    """Returns once the client's connection is gone (the body has been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def watch_departure(request: RouteRequest) -> asyncio.Future[None]:
    """A future done when the rollout's connection goes away; cancel it when done waiting."""
    return asyncio.ensure_future(disconnected(request.receive))


__all__ = [
    "ROUTE_PREFIX",
    "ROUTE_SUFFIX",
    "HeadCheck",
    "Refusal",
    "RouteApp",
    "RouteRequest",
    "encode_json",
    "end_stream",
    "send_empty",
    "send_json",
    "send_piece",
    "start_stream",
    "watch_departure",
]
