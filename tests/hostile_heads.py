"""Clients that go after a server before its app sees a request (heads that never end, too
many headers, heads sent slowly or never finished, more half-open connections than it takes),
and the checks every server we run must pass against them (`core.serving.http_limits`).

Raw sockets on the running event loop, which the servers under test share. A check is given
`start(**limits)`: an async context manager serving the app under test held to
`HttpLimits(**limits)`, yielding a `Listener`; `CHECKS` are all of them, and a server's tests
run each against its own `start` through the `hostile_check` fixture (tests/conftest.py).
Nothing here measures time: a server that should
close a connection and does not fails the check after `HANG_SEC`, and the configured timeouts
are short only so that the checks are quick.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass

import pytest

#: Longer than any wait a check expects: a server that has not closed by then never will.
HANG_SEC = 30.0
#: Where an endless header gives up: far past every head limit and the socket buffers on the
#: way, well short of what the server would hold (and copy, again and again) if it kept it.
GIVE_UP_BYTES = 16 * 1024 * 1024
#: A header timeout short enough for quick checks.
SHORT_SEC = 0.5

_PIECE = 16 * 1024


@dataclass(frozen=True)
class Listener:
    """A server under test: its port, and a request its app answers."""

    port: int
    path: str
    """A path the app answers with `answered`, asked with `headers` (its bearer, say)."""
    answered: int
    headers: tuple[str, ...] = ()

    def request(self, *extra: str) -> bytes:
        """A whole request for `path`: `head(path, *headers, *extra)`."""
        return head(self.path, *self.headers, *extra)


Start = Callable[..., AbstractAsyncContextManager[Listener]]
Check = Callable[[Start], Awaitable[None]]


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def head(path: str, *headers: str) -> bytes:
    """A whole `GET` head with `Host`, `Connection: close` and `headers` (3 and more)."""
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def status_of(raw: bytes) -> int:
    """The status code of the first response in `raw`."""
    assert raw.startswith(b"HTTP/1.1 "), raw[:200]
    return int(raw[9:12])


async def read_to_close(reader: asyncio.StreamReader) -> bytes:
    """What comes back until the server closes the connection (or resets it)."""
    received = bytearray()
    try:
        with suppress(ConnectionError):
            while chunk := await asyncio.wait_for(reader.read(65536), HANG_SEC):
                received += chunk
    except TimeoutError:
        pytest.fail(f"the server kept the connection open (answered {bytes(received)[:200]!r})")
    return bytes(received)


async def read_answer(reader: asyncio.StreamReader) -> bytes:
    """One response with a Content-Length, on a connection that stays open."""
    answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANG_SEC)
    length = next(
        int(line.split(b":", 1)[1])
        for line in answer.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return answer + await reader.readexactly(length)


async def exchange(port: int, data: bytes) -> bytes:
    """Send `data` as it is; what came back before the server closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        with suppress(ConnectionError):
            await writer.drain()
        return await read_to_close(reader)
    finally:
        writer.close()


async def ask(listener: Listener) -> int:
    """The status a well-formed request is answered with."""
    return status_of(await exchange(listener.port, listener.request()))


@dataclass(frozen=True)
class Cutoff:
    sent: int
    """Bytes of the header value written before the server stopped taking them."""
    answer: bytes
    """What came back (a refusal can be lost in the reset for the bytes left unread)."""


async def endless_header(port: int, path: str, meanwhile: Callable[[], Awaitable[None]]) -> Cutoff:
    """A head whose one header value goes on until the server stops taking it, or
    `GIVE_UP_BYTES`; `meanwhile` runs once the value is 32 KiB long (under any head limit)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = 0
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: ".encode())
        with suppress(ConnectionError):
            while sent < GIVE_UP_BYTES and not reader.at_eof():
                writer.write(b"a" * _PIECE)
                sent += _PIECE
                await writer.drain()
                await asyncio.sleep(0)  # the server shares this loop: let it read
                if sent == 2 * _PIECE:
                    await meanwhile()
        if sent >= GIVE_UP_BYTES:
            return Cutoff(sent, b"")
        return Cutoff(sent, await read_to_close(reader))
    finally:
        writer.close()


async def trickled_head(port: int, path: str) -> bytes:
    """A head sent a byte at a time, never finished: what came back before the server closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def drip() -> None:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".encode())
        with suppress(ConnectionError):
            while True:
                await writer.drain()
                await asyncio.sleep(SHORT_SEC / 10)
                writer.write(b"a")

    dripping = asyncio.ensure_future(drip())
    try:
        return await read_to_close(reader)
    finally:
        dripping.cancel()
        writer.close()


@asynccontextmanager
async def half_open(port: int, count: int) -> AsyncIterator[list[asyncio.StreamReader]]:
    """`count` connections that each send half a request head and wait; closed at the end."""
    async with AsyncExitStack() as stack:
        readers = []
        for _ in range(count):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            stack.callback(writer.close)
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            await writer.drain()
            readers.append(reader)
        yield readers


# -- the checks ------------------------------------------------------------------------------


async def check_an_endless_header_is_cut_off(start: Start) -> None:
    """Cut off within a bounded number of bytes, while a second connection is answered."""
    async with start() as listener:
        meanwhile: list[int] = []

        async def second_client() -> None:
            meanwhile.append(await ask(listener))

        cutoff = await endless_header(listener.port, listener.path, second_client)
        assert cutoff.sent < GIVE_UP_BYTES
        assert cutoff.answer == b"" or status_of(cutoff.answer) == 431
        assert meanwhile == [listener.answered]
        assert await ask(listener) == listener.answered


async def check_too_many_headers_are_refused(start: Start) -> None:
    async with start(max_headers=10) as listener:
        # The request's own headers: its lines less the request line and the blank end.
        room = 10 - (len(listener.request().split(b"\r\n")) - 3)
        at_limit = listener.request(*(f"X-Header-{n}: {n}" for n in range(room)))
        assert status_of(await exchange(listener.port, at_limit)) == listener.answered
        over = listener.request(*(f"X-Header-{n}: {n}" for n in range(room + 1)))
        assert status_of(await exchange(listener.port, over)) == 431
        flood = listener.request(*(f"X{n}: {n}" for n in range(20_000)))
        raw = await exchange(listener.port, flood)
        assert raw == b"" or status_of(raw) == 431
        assert await ask(listener) == listener.answered


async def check_a_stalled_head_is_closed(start: Start) -> None:
    """Half a head and then nothing, a head trickled a byte at a time, and a connection that
    sends nothing: each closed after the header timeout."""
    async with start(header_timeout_sec=SHORT_SEC) as listener:
        stalled = await exchange(listener.port, f"GET {listener.path} HTTP/1.1\r\n".encode())
        assert status_of(stalled) == 408
        trickled = await trickled_head(listener.port, listener.path)
        assert trickled == b"" or status_of(trickled) == 408
        assert await exchange(listener.port, b"") == b""
        assert await ask(listener) == listener.answered


async def check_half_open_connections_past_the_limit(start: Start) -> None:
    """Past `max_connections` a request is answered 503, and past twice as many a new
    connection is closed at once: refused either way, never left waiting."""
    async with (
        start(max_connections=4, header_timeout_sec=4 * HANG_SEC) as listener,
        half_open(listener.port, 4),
    ):
        assert await ask(listener) == 503
        async with half_open(listener.port, 4):  # twice the limit
            assert await exchange(listener.port, listener.request()) == b""


async def check_half_open_connections_are_reclaimed(start: Start) -> None:
    """Connections held half-open are closed by the header timeout, and then the server
    answers again."""
    async with start(max_connections=4, header_timeout_sec=SHORT_SEC) as listener:
        async with half_open(listener.port, 8) as readers:
            # The server forgets a connection before it closes it, so once these are closed
            # their slots are free.
            answers = [await read_to_close(reader) for reader in readers]
        assert {status_of(answer) for answer in answers} == {408}
        assert await ask(listener) == listener.answered


#: Every check, in the order a server's tests run them.
async def check_a_websocket_upgrade_is_a_plain_request(start: Start) -> None:
    """No server of ours speaks WebSocket: an upgrade is never switched to (no 101), the
    request is answered as any other, and the listener goes on answering."""
    async with start() as listener:
        lines = [
            f"GET {listener.path} HTTP/1.1",
            "Host: 127.0.0.1",
            "Connection: Upgrade",
            "Upgrade: websocket",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version: 13",
            *listener.headers,
        ]
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        try:
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
            assert status_of(await read_answer(reader)) == listener.answered
        finally:
            writer.close()
        assert await ask(listener) == listener.answered


CHECKS: tuple[Check, ...] = (
    check_an_endless_header_is_cut_off,
    check_too_many_headers_are_refused,
    check_a_stalled_head_is_closed,
    check_half_open_connections_past_the_limit,
    check_half_open_connections_are_reclaimed,
    check_a_websocket_upgrade_is_a_plain_request,
)
