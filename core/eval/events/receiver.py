"""The eval's ownership-event receiver (EVAL.md §6, PROTOCOL.md §8.1): a loopback OTLP/HTTP
logs endpoint that rollout servers publish their status changes to.

    POST /v1/logs

A server started with `OSMOSIS_ROLLOUT_OTLP_ENDPOINT=<receiver.endpoint>` exports its
ownership records there. The body is an OTLP `ExportLogsServiceRequest`, as protobuf
(`application/x-protobuf`, what the OpenTelemetry exporter sends) or as OTLP JSON
(`application/json`), optionally `gzip` or `deflate` encoded; it is parsed by the OpenTelemetry
protocol package, never by hand. Each usable ownership record becomes an `OwnershipEvent`
handed to the `on_event` hook, synchronously and in the order the request holds them, so
nothing is queued here: the board decides what to keep.

The port is reachable by every local process, so a request is only trusted as far as it
parses. A receiver given a `token` (`osmosis-tui watch --events-listen`, which may listen
beyond loopback) first wants `Authorization: Bearer <token>` on every request, compared in
constant time: without it the answer is 401 and nothing is read. What is refused never
reaches the hook and never stops the run:

- another content type or content encoding: 415;
- a body (or its decompressed content) over `max_body_bytes`: 413, told by its Content-Length
  before any of it is read, else as soon as the stream passes the limit;
- a body that does not arrive within `read_timeout_sec`: 408;
- a body that does not decode: 400;
- more than `max_concurrent_requests` requests at once: 503 with `Retry-After`, which the
  OpenTelemetry exporter retries;
- before any of that, the listener's own bounds (`http_limits`, `core.serving.http_limits`): a
  request head too big, with too many headers or too slow to arrive, 431 or 408; past its
  connection limit, 503.

A refusal closes the connection, so a client that goes on sending (or lied about its length)
holds nothing here; one that had not finished sending may see the reset instead of the
answer. A body longer than its Content-Length is read as declared; uvicorn refuses the bytes
after it as a malformed next request.

An ownership record dated more than `clock_slack_sec` (300 s) from the receiver's clock is not
a usable event (forged, or from a broken clock): it is counted as dropped, never handed on.

Otherwise the answer is OTLP's success, an `ExportLogsServiceResponse` in the request's
encoding, with `partial_success.rejected_log_records` counting the records that were not
usable ownership events. The counts since start are `accepted` (events handed to the hook),
`dropped` (records that were not) and `refused` (requests answered with an error).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Callable

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from core.eval.errors import EvalError
from core.eval.events.ownership import CLOCK_SLACK_SEC, OwnershipEvent, ownership_event
from core.serving.asgi import (
    BodyTooLarge,
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
from core.serving.http_limits import HttpLimits
from core.serving.loopback import (
    HTTP_LIMITS,
    LoopbackServer,
    LoopbackService,
    listener_options,
)
from core.transport import CODINGS, ContentTooLarge, inflate

logger = logging.getLogger(__name__)

LOGS_PATH = "/v1/logs"
#: An ownership record is a few hundred bytes and the exporter sends at most 128 per request,
#: so a real body is tens of KiB: this leaves room for any honest batch and bounds the rest.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: Servers export about once a second each; more requests than this at once is not a server.
MAX_CONCURRENT_REQUESTS = 8
#: The exporter gives up after 3 s; a body still arriving after this never will.
READ_TIMEOUT_SEC = 10.0

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

EventHook = Callable[[OwnershipEvent], None]


class EventReceiverError(EvalError, RuntimeError):
    """The event receiver could not be started (its port cannot be bound)."""


class _Refusal(Exception):
    """A request answered with an error status instead of being read."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _media_type(headers: Headers) -> str | None:
    media_type = (header_text(headers, b"content-type") or "").partition(";")[0].strip().lower()
    return media_type if media_type in (PROTOBUF, JSON) else None


def _coding(headers: Headers) -> str | None:
    """The body's content coding, None when it is not encoded."""
    encoding = (header_text(headers, b"content-encoding") or "identity").strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding not in CODINGS:
        raise _Refusal(415, f"unsupported content encoding {encoding[:40]!r}")
    return encoding


def _declared_length(headers: Headers, limit: int) -> None:
    declared = headers.get(b"content-length")
    if declared is None:
        return
    if not declared.isdigit():
        raise _Refusal(400, "bad Content-Length")
    if int(declared) > limit:
        raise _Refusal(413, f"the body is over {limit} bytes")


async def _read_body(receive: Receive, limit: int) -> bytes:
    """The body, refused as soon as it passes `limit`: never more than that is held."""
    try:
        return await read_body(receive, limit)
    except BodyTooLarge as exc:
        raise _Refusal(413, f"the body is over {limit} bytes") from exc


def _decompress(body: bytes, coding: str, limit: int) -> bytes:
    """`body` decoded, refused once its content passes `limit` (so a small bomb stays small)."""
    try:
        return inflate(body, coding, limit)
    except ContentTooLarge as exc:
        raise _Refusal(413, f"the decompressed body is over {limit} bytes") from exc
    except ValueError as exc:
        raise _Refusal(400, str(exc)) from exc


def decode_export_request(content: bytes, media_type: str) -> ExportLogsServiceRequest:
    """`content` (protobuf or OTLP JSON) as a request; `ValueError` when it is not one.

    Both parsers bound nesting (the protobuf runtime's depth limit, json_format's recursion
    depth and Python's own), so a deeply nested value is refused rather than recursed into.
    """
    message = ExportLogsServiceRequest()
    if media_type == PROTOBUF:
        try:
            message.ParseFromString(content)
        except DecodeError as exc:
            raise ValueError(f"not an OTLP logs request: {exc}") from exc
        return message
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError("the JSON body is not UTF-8") from exc
    # json_format would read a top-level array or string as an empty message.
    if not text.lstrip().startswith("{"):
        raise ValueError("the JSON body is not an object")
    try:
        # OTLP JSON receivers must ignore fields they do not know (newer senders add some).
        json_format.Parse(text, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ValueError(f"not an OTLP logs request: {str(exc)[:200]}") from exc
    return message


async def _refuse(send: Send, status: int, reason: str, headers: tuple[Header, ...] = ()) -> None:
    # The connection is closed after a refusal: its body may be unread, and a client that
    # keeps streaming one (or lies about its length) is not worth keeping a connection for.
    await send_whole(
        send,
        status,
        reason.encode(),
        [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close"), *headers],
    )


async def _answer(send: Send, response: ExportLogsServiceResponse, media_type: str) -> None:
    if media_type == PROTOBUF:
        body = response.SerializeToString()
    else:
        body = json_format.MessageToJson(response, indent=None).encode()
    await send_whole(send, 200, body, [(b"content-type", media_type.encode())])


class EventReceiver(LoopbackService):
    """The run's ownership-event receiver; see the module docstring. An async context manager
    serving on 127.0.0.1 (or the `host` it is given) in the running event loop."""

    service_name = "the event receiver"
    bind_error = EventReceiverError

    def __init__(
        self,
        on_event: EventHook | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_concurrent_requests: int = MAX_CONCURRENT_REQUESTS,
        read_timeout_sec: float = READ_TIMEOUT_SEC,
        clock_slack_sec: float | None = CLOCK_SLACK_SEC,
        shutdown_grace_sec: int = 2,
        http_limits: HttpLimits = HTTP_LIMITS,
    ) -> None:
        """`on_event` is called once per accepted event, in the event loop; an exception
        from it is logged and the event counted as dropped. `port` 0 picks a free port
        (`--events-port` fixes it), on `host` (a watch's `--events-listen`: then with a
        `token`, the bearer every request must carry); `clock_slack_sec` is how far an
        event's time may be from ours (None: any time, for records of a fixed, old time);
        `http_limits` bounds what one connection may make the listener hold (request heads,
        connections)."""
        self._on_event = on_event
        self._host = host
        self._port = port
        # Compared as bytes: `hmac.compare_digest` takes ASCII text only.
        self._token = None if token is None else token.encode()
        self._limit = max_body_bytes
        self._max_requests = max_concurrent_requests
        self._read_timeout = read_timeout_sec
        self._clock_slack = clock_slack_sec
        self._requests = 0
        self._accepted = 0
        self._dropped = 0
        self._refused = 0
        self._listener = LoopbackServer(
            self._app,
            host=host,
            port=port,
            limits=http_limits,
            **listener_options(shutdown_grace_sec),
        )

    # -- what the run reads --------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """The base URL servers get as `OSMOSIS_ROLLOUT_OTLP_ENDPOINT` (`http://127.0.0.1:PORT`;
        they append `/v1/logs`)."""
        if self._listener.base_url is None:
            raise EventReceiverError("the event receiver is not running")
        return self._listener.base_url

    @property
    def accepted(self) -> int:
        """Ownership events handed to the hook."""
        return self._accepted

    @property
    def dropped(self) -> int:
        """Records in accepted requests that were not usable ownership events."""
        return self._dropped

    @property
    def refused(self) -> int:
        """Requests answered with an error status (and not read further)."""
        return self._refused

    # -- the route -----------------------------------------------------------------------
    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`POST /v1/logs`; what a framework would answer anything else (a 404 for another
        path, a 405 with `Allow` for another method), counted as refused."""
        if scope["type"] != "http":
            return  # no lifespan (off) and no WebSocket (`HttpLimits`): nothing else comes
        headers = request_headers(scope)
        if not self._authorized(headers):
            self._refused += 1
            await _refuse(send, 401, "Unauthorized", ((b"www-authenticate", b"Bearer"),))
        elif scope["path"] != LOGS_PATH:
            self._refused += 1
            await _refuse(send, 404, "Not Found")
        elif scope["method"] != "POST":
            self._refused += 1
            await _refuse(send, 405, "Method Not Allowed", ((b"allow", b"POST"),))
        else:
            await self._export(headers, receive, send)

    def _authorized(self, headers: Headers) -> bool:
        """Whether the request carries the bearer (always, for a receiver without one)."""
        if self._token is None:
            return True
        # The scheme's name is case-insensitive (RFC 9110); the token is compared in
        # constant time, so that its length and content cannot be timed out of the answers.
        scheme, _, credentials = headers.get(b"authorization", b"").partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials, self._token)

    async def _export(self, headers: Headers, receive: Receive, send: Send) -> None:
        if self._requests >= self._max_requests:
            self._refused += 1
            await _refuse(send, 503, "too many requests at once", ((b"retry-after", b"1"),))
            return
        self._requests += 1
        try:
            media_type, response = await self._read_and_deliver(headers, receive)
        except _Refusal as refusal:
            self._refused += 1
            await _refuse(send, refusal.status, refusal.reason)
        except Disconnected:
            self._refused += 1  # gone before its body arrived: nobody is left to answer
        else:
            await _answer(send, response, media_type)
        finally:
            self._requests -= 1

    async def _read_and_deliver(
        self, headers: Headers, receive: Receive
    ) -> tuple[str, ExportLogsServiceResponse]:
        media_type = _media_type(headers)
        if media_type is None:
            raise _Refusal(415, f"send {PROTOBUF} or {JSON}")
        coding = _coding(headers)
        _declared_length(headers, self._limit)
        try:
            body = await asyncio.wait_for(_read_body(receive, self._limit), self._read_timeout)
        except asyncio.TimeoutError as exc:
            raise _Refusal(408, "the body did not arrive in time") from exc
        content = body if coding is None else _decompress(body, coding, self._limit)
        del body  # the compressed copy is not needed while the request is parsed
        try:
            export = decode_export_request(content, media_type)
        except ValueError as exc:
            raise _Refusal(400, str(exc)) from exc
        response = ExportLogsServiceResponse()
        rejected = self._deliver(export, time.monotonic(), time.time())
        if rejected:
            response.partial_success.rejected_log_records = rejected
            response.partial_success.error_message = (
                "only rollout.ownership records with a usable rollout_id, server_id, status "
                "and event_sequence, dated near the receiver's clock, are accepted"
            )
        return media_type, response

    def _deliver(self, export: ExportLogsServiceRequest, received_at: float, now: float) -> int:
        """Hand each usable record, dated near `now`, to the hook; returns how many were
        dropped."""
        dropped = 0
        hook_failed = False
        for resource_logs in export.resource_logs:
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    event = ownership_event(record, received_at=received_at)
                    if event is None or (
                        self._clock_slack is not None
                        and not event.dated_near(now, self._clock_slack)
                    ):
                        dropped += 1
                        continue
                    try:
                        if self._on_event is not None:
                            self._on_event(event)
                    except Exception:
                        # A bug on the board's side: said once per request, not per record.
                        if not hook_failed:
                            logger.exception("the ownership event hook failed")
                        hook_failed = True
                        dropped += 1
                        continue
                    self._accepted += 1
        self._dropped += dropped
        return dropped


__all__ = [
    "JSON",
    "LOGS_PATH",
    "MAX_BODY_BYTES",
    "MAX_CONCURRENT_REQUESTS",
    "PROTOBUF",
    "READ_TIMEOUT_SEC",
    "EventHook",
    "EventReceiver",
    "EventReceiverError",
    "decode_export_request",
]
