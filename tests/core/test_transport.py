"""core.transport: aiohttp under httpx, failing with the httpx exceptions httpx would raise."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from core import transport as transport_module
from core.transport import AiohttpTransport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[str]:
    """A TCP server that answers whatever bytes the test writes (a misbehaving peer)."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + (await reader.readexactly(length) if length else b"")


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=AiohttpTransport(), timeout=2.0)


async def test_a_round_trip_keeps_status_headers_and_body() -> None:
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        body = gzip.compress(b'{"ok": true}')
        writer.write(
            b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n"
            b"Content-Encoding: gzip\r\nX-Extra: 1\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        await writer.drain()
        writer.close()

    async with raw_server(handler) as url, client() as http:
        response = await http.post(f"{url}/rollout", json={"a": 1}, headers={"X-Lease": "t"})
    assert response.status_code == 202
    assert response.json() == {"ok": True}  # httpx decoded the gzip body itself
    assert response.headers["x-extra"] == "1"
    request = seen[0]
    assert request.startswith(b"POST /rollout HTTP/1.1\r\n")
    assert b"x-lease: t" in request.lower()
    assert request.endswith(b'{"a":1}')


async def test_redirects_are_returned_not_followed() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 301 Moved\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    async with raw_server(handler) as url, client() as http:
        response = await http.get(f"{url}/x", follow_redirects=False)
    assert response.status_code == 301


async def test_connection_refused_is_connect_error() -> None:
    async def drain(reader: asyncio.StreamReader, _writer: asyncio.StreamWriter) -> None:
        await read_request(reader)

    async with raw_server(drain) as url:
        pass  # closed again: nothing listens on that port now
    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(url)


async def test_a_peer_that_hangs_up_is_a_remote_protocol_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.close()

    async with raw_server(handler) as url, client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(url)


async def test_a_truncated_body_is_a_remote_protocol_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"partial":')
        await writer.drain()
        writer.close()

    async with raw_server(handler) as url, client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(url)


async def test_garbage_instead_of_http_is_a_remote_protocol_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await writer.drain()
        writer.close()

    async with raw_server(handler) as url, client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(url)


async def test_a_silent_peer_is_a_read_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    async with raw_server(handler) as url, client() as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get(url, timeout=httpx.Timeout(0.3))


async def test_an_oversized_body_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport_module, "MAX_BODY_BYTES", 1000)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(5):
            writer.write(b"190\r\n" + b"x" * 400 + b"\r\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async with raw_server(handler) as url, client() as http:
        with pytest.raises(httpx.ReadError, match="exceeds 1000 bytes"):
            await http.get(url)


async def test_keep_alive_connections_are_reused() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async with raw_server(handler) as url, client() as http:
        for _ in range(5):
            assert (await http.get(url)).text == "ok"
    assert connections == 1
