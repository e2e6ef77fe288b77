"""Bare ASGI, what the eval's loopback listeners (the model gateway, the event receiver) share.

Both answer one POST route and refuse everything else, on every model call and every export
of a run: a framework's routing, request and response objects would cost about as much CPU
per request as the work itself, and importing one (Starlette, with AnyIO) about 50 ms at
every start. What is here is what both need and nothing more: the ASGI types, a request's
headers as the frameworks read them, the body read with a bound, and a whole response sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Header = tuple[bytes, bytes]
#: A request's headers: lower-case names to the first value of each (`request_headers`).
Headers = dict[bytes, bytes]


class Disconnected(Exception):
    """The client went away before its request's body had arrived: nobody to answer."""


class BodyTooLarge(Exception):
    """The body passed the bound it was read with (what came stays unread)."""


def request_headers(scope: Scope) -> Headers:
    """Lower-case names to values; the first value of a repeated header (as Starlette reads
    them)."""
    return {name.lower(): value for name, value in reversed(scope["headers"])}


def header_text(headers: Headers, name: bytes) -> str | None:
    """The value of header `name` (lower-case) in `request_headers`, as text; None when absent."""
    value = headers.get(name)
    return None if value is None else value.decode("latin-1")


async def read_body(receive: Receive, limit: int | None = None) -> bytes:
    """The whole body; `BodyTooLarge` as soon as it passes `limit` bytes (never more than that
    is held), `Disconnected` when the client goes away first."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        if limit is not None and len(body) + len(chunk) > limit:
            raise BodyTooLarge
        body += chunk
        if not message.get("more_body", False):
            return bytes(body)


async def send_whole(send: Send, status: int, body: bytes, headers: Iterable[Header] = ()) -> None:
    """A response of `status` with `body` (its Content-Length set here) and `headers`."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


__all__ = [
    "BodyTooLarge",
    "Disconnected",
    "Header",
    "Headers",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "header_text",
    "read_body",
    "request_headers",
    "send_whole",
]
