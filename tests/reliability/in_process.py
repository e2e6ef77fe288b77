"""Servers on the test's own event loop (a rollout server, the stub chat endpoint) and an
in-process eval session against them: `osmosis-tui eval --server ...` without the subprocess."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.eval import EvalRequest, EvalSession, EvalSummary, prepare
from core.serving.loopback import serve_in_loop
from server_stub import LocalBackend, create_rollout_server
from server_stub.demo import ExactMatchGrader, MultiplyWorkflow, aclose_chat_client
from server_stub.llm import create_chat_app
from server_stub.llm_behaviour import StubChatSettings
from server_stub.workflow import AgentWorkflowConfig, ConcurrencyConfig
from tests.eval.runs.files import write_jsonl


def demo_app(
    *,
    max_concurrent: int | None = 16,
    workflow: Any = MultiplyWorkflow,
    grader: Any = ExactMatchGrader,
    **server: Any,
) -> Any:
    backend = LocalBackend(
        workflow=workflow,
        grader=grader,
        workflow_config=AgentWorkflowConfig(
            name="reliability", concurrency=ConcurrencyConfig(max_concurrent=max_concurrent)
        ),
    )
    return create_rollout_server(backend=backend, configure_logging=False, **server)


@asynccontextmanager
async def rollout_server(app: Any) -> AsyncIterator[str]:
    """`app` under uvicorn on 127.0.0.1:<free port>, on the running loop; yields its URL."""
    try:
        async with serve_in_loop(app) as url:
            yield url
    finally:
        await aclose_chat_client()


@asynccontextmanager
async def chat_endpoint(
    settings: StubChatSettings | None = None, **kwargs: Any
) -> AsyncIterator[str]:
    """The stub chat endpoint; yields the base URL a rollout appends /chat/completions to."""
    app = create_chat_app(settings or StubChatSettings(), **kwargs)
    async with serve_in_loop(app, timeout_graceful_shutdown=1.0) as url:
        yield f"{url}/v1"


@dataclass
class SessionRun:
    """An in-process eval session and what its front end was told."""

    summary: EvalSummary
    session: EvalSession
    notices: list[str] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return self.summary.folder


async def run_session(
    tmp_path: Path,
    rows: list[dict[str, Any]] | Path,
    *,
    before_run: Callable[[EvalSession], None] | None = None,
    **request: Any,
) -> SessionRun:
    """`osmosis-tui eval --server ...` without the subprocess: prepare, run, summarise.
    `before_run` sees the session before it starts (to hook into its board)."""
    dataset = rows if isinstance(rows, Path) else write_jsonl(tmp_path / "rows.jsonl", rows)
    request.setdefault("output", tmp_path / "out")
    request.setdefault("name", "run")
    plan = prepare(EvalRequest(dataset_file=dataset, **request))
    notices: list[str] = []
    session = EvalSession(plan, on_notice=notices.append)
    if before_run is not None:
        before_run(session)
    summary = await session.run()
    return SessionRun(summary, session, notices)
