"""How the rollout client's hot requests leave: through the caller's `httpx.AsyncClient`, or,
when the client made its own, straight through the transport under it.

A caller's client is always used as given (its hooks, auth, default headers and transport
apply). A client the rollout client made itself has none of those, so its admissions and
polls skip httpx's request and response objects and go to `AiohttpTransport.exchange`, which
costs about half as much CPU per request and fails with the same httpx exceptions
(bench/README.md has the figures). Either way the answer is an `Exchange`.

Each path prepares a request's URL, headers and timeout once (`prepare`), in its own form, so
that a handle polling the same URL again and again builds nothing per poll.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import httpx

from core.transport import AiohttpTransport, Exchange


class Prepared(NamedTuple):
    """A request's fixed parts in the form its path sends them (opaque to callers)."""

    url: Any
    headers: Any
    timeout: Any


class HttpxWire:
    """Requests through a caller's `httpx.AsyncClient`, exactly as it is configured."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    def prepare(
        self, url: str, headers: Mapping[str, str], timeout: httpx.Timeout | None = None
    ) -> Prepared:
        # None keeps the client's own default timeout.
        return Prepared(httpx.URL(url), httpx.Headers(headers), timeout)

    async def send(self, method: str, request: Prepared, body: bytes | None = None) -> Exchange:
        extra = {} if request.timeout is None else {"timeout": request.timeout}
        response = await self._http.request(
            method,
            request.url,
            content=body,
            headers=request.headers,
            follow_redirects=False,
            **extra,
        )
        return Exchange(response.status_code, response.headers, (), response.content)


class DirectWire:
    """Requests straight through the transport of a client the rollout client owns;
    `default_timeout` is that client's (what httpx would have applied)."""

    def __init__(self, transport: AiohttpTransport, default_timeout: httpx.Timeout) -> None:
        self._transport = transport
        self._default_timeout = default_timeout

    def prepare(
        self, url: str, headers: Mapping[str, str], timeout: httpx.Timeout | None = None
    ) -> Prepared:
        return Prepared(url, dict(headers), (timeout or self._default_timeout).as_dict())

    async def send(self, method: str, request: Prepared, body: bytes | None = None) -> Exchange:
        return await self._transport.exchange(
            method, request.url, headers=request.headers, body=body, timeout=request.timeout
        )


Wire = HttpxWire | DirectWire

__all__ = ["DirectWire", "HttpxWire", "Prepared", "Wire"]
