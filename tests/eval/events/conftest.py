"""Fixtures for the event receiver tests: a receiver on a free loopback port that remembers
every event its hook is given."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from core.eval.events.ownership import OwnershipEvent
from core.eval.events.receiver import EventReceiver


@pytest.fixture
def events() -> list[OwnershipEvent]:
    return []


@pytest.fixture
async def receiver(events: list[OwnershipEvent]) -> AsyncIterator[EventReceiver]:
    async with EventReceiver(events.append, read_timeout_sec=2.0) as running:
        yield running


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30.0) as http:
        yield http
