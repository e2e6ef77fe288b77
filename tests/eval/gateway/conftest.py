"""Fixtures for the model gateway tests: a fake upstream and a gateway on free loopback ports."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.conftest import Serve
from tests.eval.gateway.fake_upstream import FakeUpstream

UPSTREAM_KEY = "sk-upstream-secret-0123456789"


@pytest.fixture
async def fake() -> FakeUpstream:
    return FakeUpstream()


@pytest.fixture
async def fake_url(serve: Serve, fake: FakeUpstream) -> AsyncIterator[str]:
    """The fake's OpenAI-style base URL (`http://127.0.0.1:P/v1`)."""
    async with serve(fake.app) as url:
        yield f"{url}/v1"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30.0) as http:
        yield http
