"""Fixtures shared by every test package: real uvicorn servers on free loopback ports."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from server_stub.serving import serve_in_loop

Serve = Callable[..., AbstractAsyncContextManager[str]]


@pytest.fixture
def serve() -> Serve:
    """`async with serve(app) as url:` runs `app` under uvicorn on 127.0.0.1:<free port>."""

    def _serve(app: Any, **overrides: Any) -> AbstractAsyncContextManager[str]:
        return serve_in_loop(app, **overrides)

    return _serve


@pytest.fixture
async def anyio_backend() -> AsyncIterator[str]:
    yield "asyncio"
