"""A faster transport under `httpx.AsyncClient`, built on aiohttp's C-accelerated client.

The public API stays httpx (`RolloutClient(http_client=httpx.AsyncClient(...))`); only what
runs under it changes. httpx's default transport costs most of a rollout's client CPU
(httpcore scans and polls every pooled connection on each request); this one hands the
request to an aiohttp session and maps every failure onto the httpx exception the rollout
client's retry rules expect, so behaviour is unchanged (bench/README.md has the figures).

Every body read here is bounded twice: what is read off the wire (`MAX_BODY_BYTES`), and what
a gzip or deflate body inflates to (`inflate`, the one decoder of content codings, which the
event receiver uses for request bodies too): a 1 MiB answer can inflate to a GiB.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import aiohttp
import httpx

# The largest body read into memory, and the most one inflates to; a peer sending more is
# broken or hostile.
MAX_BODY_BYTES = 64 * 1024 * 1024
#: The content codings `inflate` undoes (what httpx and aiohttp ask for without brotli).
CODINGS = ("gzip", "deflate")
# Response headers that describe the body as sent, not as `Exchange.content` holds it.
_CODED_HEADERS = (b"content-encoding", b"content-length")


class ContentTooLarge(ValueError):
    """A body inflated past its bound (no more than that was ever inflated)."""


def inflate(body: bytes, encoding: str | None, limit: int = MAX_BODY_BYTES) -> bytes:
    """`body` with the content codings of `encoding` (a Content-Encoding value: `gzip`,
    `deflate`, `identity`, or several, comma-separated, in the order applied) undone, never
    holding more than `limit` bytes inflated: `ContentTooLarge` past it (so a small bomb stays
    small), `ValueError` for another coding or a body that is corrupt, truncated or followed
    by data of its own."""
    codings = [coding.strip().lower() for coding in (encoding or "").split(",")]
    for coding in reversed(codings):
        if coding in ("", "identity"):
            continue
        if coding not in CODINGS:
            raise ValueError(f"unsupported content coding {coding[:40]!r}")
        # gzip's header; deflate as HTTP means it (zlib's header), or raw as some servers send.
        wbits = 16 + zlib.MAX_WBITS if coding == "gzip" else _deflate_wbits(body)
        decoder = zlib.decompressobj(wbits)
        try:
            body = decoder.decompress(body, limit + 1)
        except zlib.error as exc:
            raise ValueError(f"the {coding} body is corrupt: {exc}") from None
        if len(body) > limit:
            raise ContentTooLarge(f"the body inflates to more than {limit} bytes")
        if not decoder.eof or decoder.unused_data:
            raise ValueError(f"the {coding} body is truncated or has trailing data")
    return body


def _deflate_wbits(body: bytes) -> int:
    """zlib's wbits for a deflate body: zlib's header when it starts with one, else raw."""
    zlib_header = (
        len(body) >= 2 and body[0] & 0x0F == zlib.DEFLATED and (body[0] << 8 | body[1]) % 31 == 0
    )
    return zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS


class Exchange(NamedTuple):
    """One HTTP exchange as the wire gave it: the body read whole, its content coding undone
    (`inflate`); `headers` and `raw_headers` as they came."""

    status: int
    headers: Mapping[str, str]
    """Case-insensitive, as aiohttp reads them."""
    raw_headers: tuple[tuple[bytes, bytes], ...]
    content: bytes


class AiohttpTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over aiohttp, with httpx's timeouts, limits and exception types.

    `exchange()` is the same request without httpx around it, for the hot paths of callers
    that own this transport (a rollout client's polls, the gateway's upstream calls): building
    an `httpx.Request` and `httpx.Response` per call costs as much CPU as aiohttp itself.
    """

    def __init__(self, *, limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
        self._limits = limits
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        # Made on first use: a session must be created inside the running event loop.
        session = self._session
        if session is None or session.closed:
            limits = self._limits
            connector = aiohttp.TCPConnector(
                limit=limits.max_connections or 0,
                keepalive_timeout=limits.keepalive_expiry or 5.0,
                ttl_dns_cache=300,
            )
            session = self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,  # unbounded: `inflate` decodes with a bound instead
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding"),
                trust_env=False,
            )
            # aiohttp quietly resends an idempotent request once when a kept-alive connection
            # turns out closed; the rollout client counts its own retries (PROTOCOL.md §6.3),
            # so this one must not happen underneath. No public switch exists in 3.14.
            session._retry_connection = False
        return session

    async def exchange(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        body: bytes | None = None,
        timeout: Mapping[str, float | None] | None = None,
        request: httpx.Request | None = None,
    ) -> Exchange:
        """Send one request and read its whole answer, decoded; failures raise the httpx
        exception httpx's own transport would have (carrying `request` when given), a body
        past `MAX_BODY_BYTES` read or inflated `httpx.ReadError`. `timeout` is an
        `httpx.Timeout.as_dict()`; redirects are returned, never followed."""
        timeouts = timeout or {}
        client_timeout = aiohttp.ClientTimeout(
            total=None,
            # aiohttp's `connect` covers waiting for a pooled connection and connecting.
            connect=_sum(timeouts.get("pool"), timeouts.get("connect")),
            sock_connect=timeouts.get("connect"),
            sock_read=timeouts.get("read"),
        )
        session = self._open()
        try:
            async with session.request(
                method,
                url,
                headers=headers,
                data=body or None,
                timeout=client_timeout,
                allow_redirects=False,
                max_line_size=16384,
                max_field_size=16384,
            ) as response:
                content = _decoded(await _read_capped(response, request), response, request)
                return Exchange(response.status, response.headers, response.raw_headers, content)
        except Exception as exc:
            raise _as_httpx_error(exc, request) from exc

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = await self.exchange(
            request.method,
            str(request.url),
            headers=list(request.headers.multi_items()),
            body=await request.aread(),
            timeout=request.extensions.get("timeout"),
            request=request,
        )
        # The body is decoded already: httpx must not decode it again (nor without a bound).
        return httpx.Response(
            answer.status,
            headers=[
                (bytes(k), bytes(v))
                for k, v in answer.raw_headers
                if bytes(k).lower() not in _CODED_HEADERS
            ],
            stream=httpx.ByteStream(answer.content),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _sum(*parts: float | None) -> float | None:
    present = [part for part in parts if part is not None]
    return sum(present) if len(present) == len(parts) else None


async def _read_capped(response: aiohttp.ClientResponse, request: httpx.Request | None) -> bytes:
    length = response.content_length
    if length is not None and length > MAX_BODY_BYTES:
        raise httpx.ReadError(
            f"response body of {length} bytes exceeds {MAX_BODY_BYTES}", request=request
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise httpx.ReadError(f"response body exceeds {MAX_BODY_BYTES} bytes", request=request)
        chunks.append(chunk)
    return b"".join(chunks)


def _decoded(
    content: bytes, response: aiohttp.ClientResponse, request: httpx.Request | None
) -> bytes:
    try:
        return inflate(content, response.headers.get("Content-Encoding"))
    except ContentTooLarge as exc:
        message = f"response body exceeds {MAX_BODY_BYTES} bytes once inflated"
        raise httpx.ReadError(message, request=request) from exc
    except ValueError as exc:
        raise httpx.DecodingError(str(exc), request=request) from exc


def _as_httpx_error(exc: Exception, request: httpx.Request | None) -> Exception:
    """The httpx exception httpx's own transport would have raised for the same failure."""
    message = str(exc) or type(exc).__name__
    kind: type[httpx.HTTPError]
    if isinstance(exc, httpx.HTTPError):
        return exc
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        kind = httpx.ConnectTimeout
    elif isinstance(exc, asyncio.TimeoutError):  # aiohttp's socket read timeouts included
        kind = httpx.ReadTimeout
    elif isinstance(exc, aiohttp.ClientConnectorError):
        kind = httpx.ConnectError
    elif isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        # The peer closed the connection mid-exchange: httpx calls that a protocol error.
        kind = httpx.RemoteProtocolError
    elif isinstance(exc, aiohttp.ClientResponseError):
        kind = httpx.RemoteProtocolError  # a malformed status line or headers
    elif isinstance(exc, (aiohttp.ClientOSError, aiohttp.ClientConnectionError, OSError)):
        kind = httpx.ReadError
    elif isinstance(exc, aiohttp.InvalidURL):
        kind = httpx.UnsupportedProtocol
    else:
        return exc
    error: Exception = kind(message, request=request)
    return error
