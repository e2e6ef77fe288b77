"""core.transport: aiohttp under httpx, failing with the httpx exceptions httpx would raise."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from core import transport as transport_module
from core.transport import AiohttpTransport, ContentTooLarge, inflate
from tests.compressed_bombs import WBITS, bomb, bomb_server

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


@pytest.mark.parametrize("kind", sorted(WBITS))
async def test_a_compressed_bomb_is_refused_once_past_the_cap(kind: str) -> None:
    """Issue 30 §8: a ~256 KiB answer inflating to 256 MiB is refused at 64 MiB inflated,
    through httpx (a `/health` read) and straight through `exchange` (the gateway's upstream
    calls, the rollout client's polls). Before, httpx inflated it whole."""
    async with bomb_server(kind, bomb(kind)) as url, client() as http:
        with pytest.raises(httpx.ReadError, match="once inflated"):
            await http.get(f"{url}/health")
        transport = AiohttpTransport()
        try:
            with pytest.raises(httpx.ReadError, match="once inflated"):
                await transport.exchange("GET", f"{url}/health")
        finally:
            await transport.aclose()


@pytest.mark.parametrize("kind", sorted(WBITS))
async def test_an_honest_compressed_answer_is_decoded_on_both_paths(kind: str) -> None:
    body = zlib.compress(b'{"ok": true}', wbits=WBITS[kind])
    async with bomb_server(kind, body) as url, client() as http:
        response = await http.get(url)
        transport = AiohttpTransport()
        try:
            answer = await transport.exchange("GET", url)
        finally:
            await transport.aclose()
    assert response.json() == {"ok": True}
    assert "content-encoding" not in response.headers  # decoded once, here
    assert answer.content == b'{"ok": true}'


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        pytest.param("br", b"x", id="unasked-coding"),
        pytest.param("gzip", gzip.compress(b"{}")[:-4], id="truncated"),
        pytest.param("gzip", gzip.compress(b"{}") + b"more", id="trailing-data"),
        pytest.param("deflate", b"not deflate", id="corrupt"),
    ],
)
def test_inflate_refuses_what_it_cannot_decode_whole(encoding: str, body: bytes) -> None:
    with pytest.raises(ValueError) as refused:
        inflate(body, encoding)
    assert not isinstance(refused.value, ContentTooLarge)


def test_inflate_undoes_codings_in_the_order_applied() -> None:
    twice = zlib.compress(gzip.compress(b"text"))
    assert inflate(twice, "gzip, deflate") == b"text"
    assert inflate(b"as is", "identity") == inflate(b"as is", None) == b"as is"
    with pytest.raises(ContentTooLarge):
        inflate(gzip.compress(bytes(101)), "gzip", limit=100)
