"""What one client connection may make a uvicorn server hold before any route runs: the size
of a request head, its headers, the time it and its body take to arrive, and how many
connections are open.

Every server we run is held to these (`core.serving.loopback`): the rollout server, the stub
chat endpoint, and the eval's own listeners (its model gateway and event receiver).

uvicorn parses with httptools, which buffers a header value until its end without limit
(`h11_max_incomplete_event_size` bounds the h11 parser only), and has no timeout for a request
head: an endless header value, or a head sent a byte at a time, holds a connection, memory and
CPU for as long as the client likes, all before the app (and its bearer check) sees the
request. `HttpLimits.uvicorn_options()` sets uvicorn's own knobs where they exist, and
`LimitedHttpToolsProtocol` does the rest:

- a head (request line and headers) over `max_head_bytes`, or with more than `max_headers`
  headers: 431, and the connection closes;
- a head not complete `header_timeout_sec` after the connection opened, or after its first
  byte on a kept-alive connection: 408 when part of it came, and the connection closes (the
  idle wait between requests is uvicorn's `timeout_keep_alive`, which the caller sets);
- a body not complete `body_timeout_sec` after its head: 408 when no answer has begun, and
  the connection closes (the app waiting for the rest is told the client left) — uvicorn
  waits for a body as long as its sender likes;
- `max_connections` connections open: every request is answered 503 by uvicorn
  (`limit_concurrency`) until some close; twice as many: a new connection is closed as soon as
  it is accepted, so a flood of connections that never send a request cannot take all of the
  process's file descriptors;
- `backlog`: connections the kernel queues before they are accepted (it caps this at
  `net.core.somaxconn`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, ClassVar

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState


@dataclass(frozen=True)
class HttpLimits:
    """The bounds one server holds its connections to; see the module docstring."""

    max_head_bytes: int = 64 * 1024
    """The request line and headers together; AWS's load balancers allow as much."""
    max_headers: int = 100
    """Headers in one request: Envoy's, Tomcat's and gunicorn's limit."""
    header_timeout_sec: float = 30.0
    """For a whole request head to arrive (nginx allows 60 s, Apache 20–40 s): a client
    writes its head at once, so only a stalled or hostile one comes near this."""
    body_timeout_sec: float = 120.0
    """For a whole request body to arrive once its head has: the eval's listeners read a body
    as it comes, and the largest a rollout sends (a long conversation, megabytes) takes
    seconds even through a slow tunnel; only a stalled or hostile sender comes near this."""
    max_connections: int = 2048
    """Connections open before requests are answered 503; the process needs a file-descriptor
    limit (`ulimit -n`) above twice this, plus what it opens otherwise."""
    backlog: int = 2048
    """Connections waiting to be accepted (uvicorn's default)."""

    def uvicorn_options(self) -> dict[str, Any]:
        """The `uvicorn.Config` options that hold a server to these limits."""
        protocol = type(
            LimitedHttpToolsProtocol.__name__, (LimitedHttpToolsProtocol,), {"limits": self}
        )
        return {
            "http": protocol,
            "limit_concurrency": self.max_connections,
            "backlog": self.backlog,
            # No server of ours speaks WebSocket. Left at "auto", uvicorn imports the
            # websockets library at every start (about 35 ms per process) to offer an upgrade
            # nothing uses; an upgrade request is now read as a plain HTTP request.
            "ws": "none",
        }


class _TooManyHeaders(Exception):
    """Raised from a parser callback: it stops httptools, which uvicorn answers 400."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, holding each connection to `limits`."""

    limits: ClassVar[HttpLimits] = HttpLimits()

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._in_head = False  # part of a request head has arrived, not all of it
        self._head_bytes = 0
        self._header_count = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None

    # -- the connection ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > 2 * self.limits.max_connections:
            self.logger.warning("Exceeded connection limit: closed a new connection.")
            transport.close()
            return
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        self._stop_body_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self._in_head:
            # Counted by whole reads: the read a head begins in may end the request before it.
            self._head_bytes += len(data)
            if self._head_bytes > self.limits.max_head_bytes:
                self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Request head too large.")
                return
        if self.timeout_keep_alive_task is None and not self._answering():
            # Bytes that begin no request (httptools skips blank lines) ended uvicorn's
            # keep-alive wait: a head is due now, within the header timeout.
            self._start_head_timer()

    # -- parser callbacks ----------------------------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0
        self._header_count = 0
        self._start_head_timer()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            raise _TooManyHeaders
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._stop_head_timer()
        super().on_headers_complete()
        # Stopped by the message's end, which a request without a body reaches at once.
        self._body_timer = self.loop.call_later(self.limits.body_timeout_sec, self._body_timed_out)

    def on_message_complete(self) -> None:
        self._stop_body_timer()
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        # uvicorn answers every parser error 400; the one `on_header` raised is a 431.
        if self._header_count > self.limits.max_headers:
            self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many request headers.")
        else:
            super().send_400_response(msg)

    # -- the header timeout --------------------------------------------------------------
    def _start_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(
                self.limits.header_timeout_sec, self._head_timed_out
            )

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self._in_head and not self._answering():
            self._refuse(HTTPStatus.REQUEST_TIMEOUT, "Request head not received in time.")
        else:  # nothing came (or a pipelined head stalled behind an answer): just close
            self.transport.close()

    # -- the body timeout ----------------------------------------------------------------
    def _stop_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_started:
            self._refuse(HTTPStatus.REQUEST_TIMEOUT, "Request body not received in time.")
        else:  # an answer has begun (the app did not wait for the body): just close
            self.transport.close()

    def _answering(self) -> bool:
        """A request's answer is under way on this connection."""
        return self.cycle is not None and not self.cycle.response_complete

    def _refuse(self, status: HTTPStatus, reason: str) -> None:
        """Answer `status` and close, leaving the rest of what the client sends unread."""
        self.logger.warning(reason)
        body = reason.encode()
        head = [STATUS_LINE[status]]
        head += [
            name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers
        ]
        head += [
            b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
