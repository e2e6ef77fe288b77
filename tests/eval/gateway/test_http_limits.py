"""What one connection may make the model gateway hold before its route (and the bearer
check) sees a request (`core.serving.http_limits`, which the eval's listeners use too): real
uvicorn on a loopback port, raw sockets, and a real chat call to show the bounds leave room
for one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from core.eval.gateway.model_gateway import ModelGateway
from core.eval.gateway.upstreams import OpenAICompatibleUpstream
from core.serving.http_limits import HttpLimits
from tests.eval.gateway.conftest import UPSTREAM_KEY
from tests.eval.gateway.fake_upstream import FakeUpstream
from tests.eval.gateway.helpers import chat_body, post_chat
from tests.hostile_heads import Check, Listener, Start, port_of


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
