"""The two requests every rollout makes, answered before FastAPI: `POST /rollout` and
`GET /rollout/{rollout_id}/result`.

FastAPI's routing, dependency solving and validation cost about half of the server's CPU per
rollout (cProfile, bench/README.md). A request this layer takes is one whose answer does not
depend on any of that: a JSON body that validates, the lease header given once and non-empty.
It is answered by the same functions the FastAPI routes call, so the two paths cannot drift.
Everything else, and every request that would be refused for its shape (a body that does not
validate, a missing header), goes on to FastAPI untouched (a read body replayed), so that
every refusal keeps FastAPI's exact answer.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.types import OBSERVED_STATUS_HEADER, POLLING_LEASE_HEADER, RolloutInitRequest

if TYPE_CHECKING:
    from server_stub.app import RolloutServer

_LEASE = POLLING_LEASE_HEADER.lower().encode("latin-1")
_OBSERVED = OBSERVED_STATUS_HEADER.lower().encode("latin-1")
_PREFIX = "/rollout/"
_RESULT_SUFFIX = "/result"


def _result_id(path: str) -> str | None:
    """The `{rollout_id}` of `/rollout/{rollout_id}/result` (one segment, as FastAPI's)."""
    if not (path.startswith(_PREFIX) and path.endswith(_RESULT_SUFFIX)):
        return None
    segment = path[len(_PREFIX) : -len(_RESULT_SUFFIX)]
    return segment if segment and "/" not in segment else None


def _is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bool(value.split(b";", 1)[0].strip().lower() == b"application/json")
    return False


class HotRoutes:
    """ASGI middleware in front of the FastAPI app of `server`."""

    def __init__(self, app: ASGIApp, server: RolloutServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            method, path = scope["method"], scope["path"]
            if method == "GET" and (rollout_id := _result_id(path)) is not None:
                if await self._result(scope, receive, send, rollout_id):
                    return
            elif method == "POST" and path == "/rollout" and _is_json(scope):
                await self._admit(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _result(self, scope: Scope, receive: Receive, send: Send, rollout_id: str) -> bool:
        arrived = time.monotonic()
        lease = observed = None
        for name, value in scope["headers"]:
            if name == _LEASE:
                if lease is not None:
                    return False
                lease = value.decode("latin-1")
            elif name == _OBSERVED:
                if observed is not None:
                    return False
                observed = value.decode("latin-1")
        if not lease:
            return False  # FastAPI's 422, in its own words
        response = await self.server.result_response(rollout_id, lease, observed, arrived)
        await response(scope, receive, send)
        return True

    async def _admit(self, scope: Scope, receive: Receive, send: Send) -> None:
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before its body arrived
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            # Parsed, then validated from Python objects: what FastAPI does with a JSON body.
            request = RolloutInitRequest.model_validate(json.loads(body))
        except (ValueError, ValidationError, RecursionError):  # RecursionError: deep nesting
            await self.app(scope, _replaying(body, receive), send)
            return
        await self.server.admit(request)(scope, receive, send)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` that gives the already-read body first, then the connection's messages."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


__all__ = ["HotRoutes"]
