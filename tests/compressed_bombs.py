"""Compressed bombs: small bodies that inflate far past what any reader of ours may hold, and a
raw loopback server answering every request with one (`core.transport.inflate` bounds them)."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

MiB = 1024 * 1024
#: What a bomb inflates to: four times the 64 MiB that a body may hold.
INFLATED_BYTES = 256 * MiB
#: zlib's wbits for each way a bomb is sent: gzip, deflate as HTTP means it, raw deflate.
WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "raw-deflate": -zlib.MAX_WBITS}


def bomb(kind: str, *, prefix: bytes = b"", filler: bytes = b" ", suffix: bytes = b"") -> bytes:
    """`prefix`, `INFLATED_BYTES` of `filler`, `suffix`, compressed as `kind` (a key of
    `WBITS`) a MiB at a time: about 256 KiB, never inflated here."""
    encoder = zlib.compressobj(9, zlib.DEFLATED, WBITS[kind])
    parts = [encoder.compress(prefix)]
    piece = filler * (MiB // len(filler))
    parts += [encoder.compress(piece) for _ in range(INFLATED_BYTES // len(piece))]
    parts += [encoder.compress(suffix), encoder.flush()]
    return b"".join(parts)


def content_encoding(kind: str) -> str:
    """The Content-Encoding a bomb of `kind` is sent with."""
    return "gzip" if kind == "gzip" else "deflate"


@asynccontextmanager
async def bomb_server(kind: str, body: bytes, status: int = 200) -> AsyncIterator[str]:
    """A loopback server answering every request with `body`, sent as `kind`; its base URL."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
            writer.write(
                f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                f"Content-Encoding: {content_encoding(kind)}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()
