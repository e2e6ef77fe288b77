"""Fixtures for the dashboard tests: a live eval over a real server_stub, and a clean terminal.

Behaviour tests run the real parts: an `LiveSource` over `server_stub` served by uvicorn on a
free loopback port that the test owns, so the test can read the server's own registry
(`app.state.rollout_futures`) to check what happened server-side. The helpers they use are in
tests/tui/helpers.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from core.eval import EvalRequest, prepare
from core.eval.results.folder import PREVIEWS_DIR
from core.serving.loopback import serve_in_loop
from server_stub import (
    AgentWorkflowConfig,
    ConcurrencyConfig,
    Grader,
    LocalBackend,
    create_rollout_server,
)
from tests.server.plugins import Echo, ExactMatch
from tests.tui.helpers import CHAT_URL, Live, LiveFactory
from tui.sources.live import LiveSource


@pytest.fixture
def live_eval(tmp_path: Path) -> LiveFactory:
    """`async with live_eval(dataset, **request) as live:` serves a fresh server_stub (running
    Echo, or `workflow=`, graded by `grader`) and prepares an eval of the `dataset` rows
    against it (the app is created by the test); `request` may select some (`rows="1,3"`).
    With `previews`, the server writes its live previews in the run folder's previews/, where
    the dashboard looks for them."""

    @asynccontextmanager
    async def start(
        dataset_rows: list[dict[str, Any]],
        *,
        result_wait: float = 0.3,
        workflow: Any = Echo,
        grader: type[Grader] = ExactMatch,
        previews: bool = False,
        **request: Any,
    ) -> AsyncIterator[Live]:
        backend = LocalBackend(
            workflow=workflow,
            grader=grader,
            workflow_config=AgentWorkflowConfig(
                name="echo", concurrency=ConcurrencyConfig(max_concurrent=16)
            ),
        )
        # A short long-poll hold, so status changes show up within a fraction of a second.
        server = create_rollout_server(
            backend=backend,
            configure_logging=False,
            result_wait_timeout_sec=result_wait,
            # None: as the environment says (no previews in the tests' environment).
            preview_root=tmp_path / "out" / "live" / PREVIEWS_DIR if previews else None,
        )
        dataset = tmp_path / "rows.jsonl"
        dataset.write_text("".join(json.dumps(r) + "\n" for r in dataset_rows))
        serving = AsyncExitStack()
        url = await serving.enter_async_context(serve_in_loop(server))
        live: Live | None = None
        try:
            plan = prepare(
                EvalRequest(
                    servers=(url,),
                    dataset_file=dataset,
                    output=tmp_path / "out",
                    name="live",
                    **{"chat_url": CHAT_URL, "max_in_flight": 8, **request},
                )
            )
            source = LiveSource(plan, rerun=f"osmosis-tui eval --server {url}")
            live = Live(server, url, source, tmp_path / "out" / "live", serving)
            yield live
        finally:
            if live is not None:
                await live.source.close()  # as the CLI does once the dashboard is gone
            # Rollouts still running would hold the server's shutdown for its drain time.
            registry = server.state.rollout_server.registry
            registry.cancel(list(registry.entries))
            if live is not None and live.closing is not None:
                await live.closing
            await serving.aclose()

    return start


@pytest.fixture
def clean_terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Snapshots must not depend on the developer's terminal settings."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL_THEME", raising=False)
    yield
