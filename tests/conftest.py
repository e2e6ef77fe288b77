"""Fixtures shared by every test package: real uvicorn servers on free loopback ports, and a
config folder of each test's own."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from core.serving.loopback import serve_in_loop
from tests.hostile_heads import CHECKS, Check

Serve = Callable[..., AbstractAsyncContextManager[str]]


@pytest.fixture
def serve() -> Serve:
    """`async with serve(app) as url:` runs `app` under uvicorn on 127.0.0.1:<free port>."""

    def _serve(app: Any, **overrides: Any) -> AbstractAsyncContextManager[str]:
        return serve_in_loop(app, **overrides)

    return _serve


@pytest.fixture(params=CHECKS, ids=lambda check: check.__name__.removeprefix("check_"))
def hostile_check(request: pytest.FixtureRequest) -> Check:
    """Each check of `tests.hostile_heads` in turn: a test that takes it runs once per check,
    against the `start` of the server it tests."""
    check: Check = request.param
    return check


@pytest.fixture
async def anyio_backend() -> AsyncIterator[str]:
    yield "asyncio"


@pytest.fixture(autouse=True)
def config_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`XDG_CONFIG_HOME` in a fresh folder for every test (and the processes it starts): the
    dashboard's remembered theme and sort (tui/settings.py) never come from the developer's
    own settings, nor from another test."""
    folder = tmp_path_factory.mktemp("config-home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    return folder
