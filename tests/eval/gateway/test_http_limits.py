"""What one connection may make the model gateway hold before its route (and the bearer
check) sees a request (`core.serving.http_limits`, which the eval's listeners use too), and
what a stranger's body may make it hold: real uvicorn on a loopback port (in a process of its
own where its memory is measured), raw sockets, and a real chat call to show the bounds leave
room for one."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from core.eval.gateway.model_gateway import ModelGateway
from core.eval.gateway.upstreams import OpenAICompatibleUpstream
from core.serving.http_limits import HttpLimits
from tests.eval.gateway.conftest import UPSTREAM_KEY
from tests.eval.gateway.fake_upstream import FakeUpstream
from tests.eval.gateway.helpers import chat_body, post_chat
from tests.hostile_heads import (
    HANG_SEC,
    SHORT_SEC,
    Check,
    Listener,
    Start,
    port_of,
    read_to_close,
    status_of,
)

#: What a stranger announces: far more than the gateway may hold for it.
HUGE_BODY_BYTES = 512 * 1024 * 1024
#: What the gateway's process may grow by while such a body is refused (issue 30 §3).
MAX_GROWTH_BYTES = 20 * 1000 * 1000


def upstream(url: str) -> OpenAICompatibleUpstream:
    return OpenAICompatibleUpstream(url, model_path="openai/gpt-5-mini", api_key=UPSTREAM_KEY)


@pytest.fixture
def start(fake_url: str) -> Start:
    """The gateway held to `HttpLimits(**limits)`; a `GET` of its route is answered 405."""

    @asynccontextmanager
    async def serving(**limits: Any) -> AsyncIterator[Listener]:
        async with (
            upstream(fake_url) as up,
            ModelGateway(up, http_limits=HttpLimits(**limits)) as gateway,
        ):
            path = gateway.chat_completions_url("r1").removeprefix(gateway.base_url)
            yield Listener(port_of(gateway.base_url), path + "/chat/completions", 405)

    return serving


async def test_hostile_heads_are_bounded(start: Start, hostile_check: Check) -> None:
    """Each check of `tests.hostile_heads`, against the model gateway."""
    await hostile_check(start)


async def test_a_big_chat_call_with_many_headers_is_within_the_limits(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    """The default bounds leave room for a long conversation sent the way SDKs send it."""
    headers = {f"X-Stainless-Header-{n}": "v" * 200 for n in range(60)}
    conversation = "word " * 800_000  # a 4 MB body: bodies are not what is bounded
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        response = await post_chat(client, gateway, chat_body(conversation), headers=headers)
    assert response.status_code == 200, response.text
    assert fake.requests[0].body["messages"][0]["content"] == conversation


def post_head(url: str, length: int, *headers: str) -> bytes:
    """A `POST` head for `url` announcing a JSON body of `length` bytes."""
    parts = urlsplit(url)
    lines = [
        f"POST {parts.path} HTTP/1.1",
        f"Host: {parts.netloc}",
        "Content-Type: application/json",
        f"Content-Length: {length}",
        *headers,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def peak_rss(pid: int) -> int:
    """The process's peak resident set so far, in bytes (`VmHWM`)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@contextmanager
def gateway_process() -> Iterator[tuple[int, str]]:
    """A gateway in a process of its own (`gateway_process`): its pid and its route's URL."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.eval.gateway.gateway_process"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield child.pid, url
    finally:
        assert child.stdin is not None
        child.stdin.close()
        try:
            child.wait(HANG_SEC)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


async def refused_before_its_body(url: str, length: int, *headers: str) -> int:
    """The status a `POST` announcing `length` bytes gets before any of them is sent; then
    the whole body is sent anyway, as long as the gateway takes it."""
    port = port_of(f"http://{urlsplit(url).netloc}")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(post_head(url, length, *headers))
        await writer.drain()
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANG_SEC)
        piece = b" " * (1024 * 1024)
        with suppress(ConnectionError):
            for _ in range(length // len(piece)):
                writer.write(piece)
                await asyncio.wait_for(writer.drain(), HANG_SEC)
        return status_of(answer)
    finally:
        writer.close()


async def test_an_unauthenticated_body_is_refused_from_its_head() -> None:
    """Issue 30 §3: a 512 MiB body without the bearer is answered 401 before a byte of it is
    sent, the connection closed; the gateway's process grows by less than 20 MB. Before, the
    gateway read the whole body first (1 GiB: 2 GiB of RSS, 401 after 8 s)."""
    with gateway_process() as (pid, url):
        # A first refusal, so that what answering costs once is in the baseline.
        assert await refused_before_its_body(url, 2) == 401
        before = peak_rss(pid)
        assert await refused_before_its_body(url, HUGE_BODY_BYTES) == 401
        wrong = "Authorization: Bearer not-the-run-s"
        assert await refused_before_its_body(url, HUGE_BODY_BYTES, wrong) == 401
        assert peak_rss(pid) - before < MAX_GROWTH_BYTES


async def test_a_body_that_never_finishes_is_answered_408(fake_url: str) -> None:
    """Issue 30 §7: a rollout's call whose body stops halfway holds its connection only until
    the body deadline (`HttpLimits.body_timeout_sec`, short here): 408, and closed. Before, it
    was held for as long as the sender stayed silent."""
    limits = HttpLimits(body_timeout_sec=SHORT_SEC)
    async with upstream(fake_url) as up, ModelGateway(up, http_limits=limits) as gateway:
        url = gateway.chat_completions_url("r1") + "/chat/completions"
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(gateway.base_url))
        try:
            bearer = f"Authorization: Bearer {gateway.api_key}"
            writer.write(post_head(url, 1000, bearer) + b'{"model": "osmosis-rollout", ')
            await writer.drain()
            assert status_of(await read_to_close(reader)) == 408
        finally:
            writer.close()
