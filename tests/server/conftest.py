"""Fixtures of the server tests: the stub chat endpoint, with a key, on a loopback port."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette

from core.serving.loopback import serve_in_loop
from server_stub.llm import create_chat_app
from server_stub.llm_behaviour import StubChatSettings
from server_stub.llm_latency import FixedLatency
from tests.server.chat import KEY


@pytest.fixture
def chat_app() -> Starlette:
    """The stub chat app, answering at once, behind `Authorization: Bearer KEY`."""
    return create_chat_app(StubChatSettings(latency=FixedLatency(0.0)), api_key=KEY)


@pytest.fixture
async def stub(chat_app: Starlette) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    """`chat_app` served by uvicorn: its base URL and a client."""
    async with serve_in_loop(chat_app) as url, httpx.AsyncClient(timeout=5.0) as client:
        yield url, client
