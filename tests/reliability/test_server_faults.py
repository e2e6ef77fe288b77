"""Rollout servers that die, restart, stop answering or stop being polled (issue 7 §1).

Already proven elsewhere, not repeated here: a server killed for good keeps what finished and
a resume completes (tests/eval/runs/test_errors.py); the lease-expiry wire shape
(tests/server/test_protocol.py); the admission-deadline message of the client against a
scripted slow peer (tests/core/test_client.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from core import RolloutAdmissionTimeoutError, RolloutClient
from core.eval.servers import pool as servers_module
from core.eval.servers.launcher import free_port
from server_stub import (
    AgentWorkflow,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    LocalBackend,
    create_rollout_server,
)
from tests.eval.runs.command import start_eval
from tests.eval.runs.files import multiply_rows, read_jsonl, write_jsonl
from tests.eval.runs.servers import start_served_demo
from tests.polling import eventually, eventually_sync
from tests.reliability.in_process import demo_app, rollout_server, run_session
from tests.reliability.proxy import proxy_to
from tui.sources.replay import ReplaySource

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for writer in list(_open_writers):
            writer.transport.abort()
        await server.wait_closed()


_open_writers: set[asyncio.StreamWriter] = set()


def health_then_silence(process_id: str) -> Handler:
    """A peer that answers GET /health like a rollout server and never answers anything else."""
    body = json.dumps(
        {
            "status": "ok",
            "concurrency": {"max_concurrent": 4, "queued": 0, "running": 0},
            "instance_id": process_id,
            "process_id": process_id,
            "lifecycle": {"accepting_rollouts": True, "active_rollouts": 0},
        }
    ).encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _open_writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"GET /health "):
                    await reader.read()  # holds the request until the client gives up
                    return
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            _open_writers.discard(writer)
            writer.transport.abort()

    return handle


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Accepts the connection, reads whatever comes, never answers."""
    _open_writers.add(writer)
    try:
        while await reader.read(65536):
            pass
    finally:
        _open_writers.discard(writer)
        writer.transport.abort()


# -- killed and restarted on the same port --------------------------------------------------


def test_a_server_restarted_on_its_port_mid_run_is_noticed_and_the_run_completes(
    tmp_path: Path,
) -> None:
    rows = 24
    port = free_port()
    dataset = write_jsonl(
        tmp_path / "rows.jsonl", multiply_rows(rows, metadata={"stub": "slow:0.5"})
    )
    folder = tmp_path / ".osmosis" / "evals" / "restart"
    server = start_served_demo("--port", str(port))
    restarted = None
    try:
        url = f"http://127.0.0.1:{port}"
        assert server.url == url
        run = start_eval(
            *("--server", url, "--dataset-file", str(dataset), "--name", "restart"),
            *("--max-in-flight", "4"),
            cwd=tmp_path,
        )
        eventually_sync(lambda: len(read_jsonl(folder / "events.jsonl")) >= 4, "4 finished items")
        server.kill()  # SIGKILL: the rollouts in flight there die with it
        restarted = start_served_demo("--port", str(port))
        stdout, stderr = run.finish()
    finally:
        server.stop()
        if restarted is not None:
            restarted.stop()
    assert run.returncode == 0, stderr
    # The run reports the new process behind the same URL (and, if it looked while nothing
    # answered there, the outage and the way back).
    assert f"server {url} restarted (its process_id changed)" in stdout
    if f"server {url} down:" in stdout:
        assert f"server {url} back up" in stdout
    logs = (folder / "logs.txt").read_text()
    assert "restarted (its process_id changed)" in logs
    # Nothing lost, nothing twice: each row has exactly one journaled result, all successes.
    events = read_jsonl(folder / "events.jsonl")
    assert Counter(e["row_index"] for e in events) == Counter(range(rows))
    assert len({e["rollout_id"] for e in events}) == rows
    index = read_jsonl(folder / "index.jsonl")
    assert [r["status"] for r in index] == ["success"] * rows
    # The rollouts lost with the old process were sent again (new ids) to the new one.
    admitted = {
        t["rollout_id"] for t in read_jsonl(folder / "transitions.jsonl") if "rollout_id" in t
    }
    assert len(admitted) > rows


# -- a server that accepts and never answers ------------------------------------------------


async def test_the_client_names_the_admission_deadline_when_nothing_answers() -> None:
    async with (
        raw_server(silent) as url,
        RolloutClient(url=url, admission_timeout_sec=0.3) as client,
    ):
        started = time.monotonic()
        with pytest.raises(RolloutAdmissionTimeoutError) as caught:
            await client.run_rollout_async([{"role": "user", "content": "hi"}], url, "silent-1")
    assert time.monotonic() - started < 5
    assert str(caught.value) == (
        "admission for rollout silent-1 timed out after 0.3 seconds; admission may have "
        "succeeded; the server requests cancellation when an unobserved rollout's polling "
        "lease expires"
    )


async def test_an_eval_on_a_server_that_never_answers_admission_stops_with_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(servers_module, "ADMISSION_TIMEOUT_SEC", 0.5)
    async with raw_server(health_then_silence("p-1")) as url:
        started = time.monotonic()
        run = await run_session(tmp_path, multiply_rows(3), servers=(url,), chat_url="stub")
    assert time.monotonic() - started < 20
    summary = run.summary
    assert summary.status == "incomplete"
    assert summary.problem is not None
    assert (
        f"admission failed on {url}: RolloutAdmissionTimeoutError: admission for rollout"
        in summary.problem
    )
    assert "timed out after 0.5 seconds; admission may have succeeded" in summary.problem
    assert summary.pending == 3
    # The board shows the rollout that was never admitted, with the same message.
    refused = [r for r in run.session.board if r.admission_error]
    assert refused and "timed out after 0.5 seconds" in (refused[0].admission_error or "")


async def test_an_eval_on_a_server_that_never_answers_health_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(servers_module, "HEALTH_TIMEOUT_SEC", 0.5)
    async with raw_server(silent) as url:
        started = time.monotonic()
        run = await run_session(tmp_path, multiply_rows(2), servers=(url,), chat_url="stub")
    assert time.monotonic() - started < 20
    assert run.summary.status == "incomplete"
    assert run.summary.problem == (
        f"no rollout server answered /health ({url}: no answer to /health within 0.5 s)"
    )


async def test_an_eval_whose_only_server_stays_down_stops_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(servers_module, "RECOVERY_GRACE_SEC", 1.0)
    rows = multiply_rows(12, metadata={"stub": "slow:0.3"})
    events_path = tmp_path / "out" / "run" / "events.jsonl"
    async with (
        rollout_server(demo_app(max_concurrent=2)) as direct,
        proxy_to(direct) as proxy,
    ):

        async def crash_after_two() -> None:
            await eventually(
                lambda: len(read_jsonl(events_path)) >= 2, "2 finished items", timeout=30
            )
            await proxy.close()  # as a crash looks from outside: connections cut, then refused

        crash = asyncio.ensure_future(crash_after_two())
        started = time.monotonic()
        run = await run_session(
            tmp_path, rows, servers=(proxy.url,), chat_url="stub", max_in_flight=2
        )
        await crash
    assert time.monotonic() - started < 30
    assert run.summary.status == "incomplete"
    assert run.summary.problem is not None
    assert "every rollout server is down and none came back within 1 s" in run.summary.problem
    assert any(f"server {proxy.url} down" in notice for notice in run.notices)
    events = read_jsonl(events_path)
    assert 2 <= len(events) < 12
    assert len({e["row_index"] for e in events}) == len(events)
    assert run.summary.pending == 12 - len(events)


# -- a server that never accepts rollouts again ----------------------------------------------


def draining_app() -> FastAPI:
    """Answers /health as a server that is shutting down and never finishes: alive, not
    accepting rollouts (the only route it has)."""
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "process_id": "draining-1",
            "lifecycle": {"accepting_rollouts": False, "active_rollouts": 0},
        }

    return app


# Before the deadline existed, such a run waited for ever: this only bounds a hang.
HANG_BOUND_SEC = 60.0


async def test_an_eval_whose_only_server_never_accepts_stops_at_the_admission_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(servers_module, "ADMISSION_TIMEOUT_SEC", 1.0)
    async with rollout_server(draining_app()) as url:
        run = await asyncio.wait_for(
            run_session(tmp_path, multiply_rows(3), servers=(url,), chat_url="stub"),
            HANG_BOUND_SEC,
        )
    summary = run.summary
    assert summary.status == "incomplete"  # exit 1, as when every server is down
    assert summary.problem == (
        f"no rollout server accepted rollouts within 1 s ({url}: draining, its /health says "
        "accepting_rollouts: false)"
    )
    assert summary.pending == 3
    assert (summary.folder / "progress.json").is_file()
    assert read_jsonl(summary.folder / "events.jsonl") == []


async def test_a_server_that_starts_draining_mid_run_stops_it_and_keeps_what_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(servers_module, "ADMISSION_TIMEOUT_SEC", 1.0)
    # The health watcher never looks: the first to meet the drain is a POST, answered 503.
    monkeypatch.setattr(servers_module, "HEALTH_INTERVAL_SEC", 600.0)
    rows = 12
    events_path = tmp_path / "out" / "run" / "events.jsonl"
    app = demo_app(max_concurrent=2)
    async with rollout_server(app) as url:

        async def drain_after_three() -> None:
            await eventually(
                lambda: len(read_jsonl(events_path)) >= 3, "3 finished items", timeout=30
            )
            app.state.rollout_server.accepting = False  # as its shutdown begins, and stays

        drain = asyncio.ensure_future(drain_after_three())
        run = await asyncio.wait_for(
            run_session(
                tmp_path,
                multiply_rows(rows, metadata={"stub": "slow:0.3"}),
                servers=(url,),
                chat_url="stub",
                max_in_flight=2,
            ),
            HANG_BOUND_SEC,
        )
        await drain
    summary = run.summary
    assert summary.status == "incomplete"
    assert summary.problem is not None
    assert summary.problem.startswith("no rollout server accepted rollouts within 1 s")
    assert any(f"server {url} draining" in notice for notice in run.notices)
    refused = {r.rollout_id: r.admission_error for r in run.session.board if r.admission_error}
    assert refused and all("POST /rollout returned 503" in (e or "") for e in refused.values())
    # transitions.jsonl keeps each, and a replay shows them as the run's board did.
    lines = read_jsonl(summary.folder / "transitions.jsonl")
    written = {t["rollout_id"]: t for t in lines if t["kind"] == "not_admitted"}
    assert {rid: t["error"] for rid, t in written.items()} == refused
    assert all(isinstance(t["row_index"], int) and t["run_index"] == 0 for t in written.values())
    replay = ReplaySource(summary.folder)
    replay.to_end()
    assert {r.rollout_id: r.admission_error for r in replay.board if r.admission_error} == refused
    assert replay.warnings == []
    # What was in flight when it began draining still finished; each item once.
    events = read_jsonl(events_path)
    assert 3 <= len(events) < rows
    assert len({e["row_index"] for e in events}) == len(events)
    assert [r["status"] for r in read_jsonl(summary.folder / "index.jsonl")] == ["success"] * len(
        events
    )
    assert summary.pending == rows - len(events)


# -- nobody polls: the lease expires and the work is cancelled -------------------------------

_cancelled: dict[str, bool] = {}


class CountsItsCancellation(AgentWorkflow[Any]):
    """Runs for a minute unless cancelled; records whether the cancellation reached it."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        rollout_id = (ctx.metadata or {})["id"]
        _cancelled[rollout_id] = False
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            _cancelled[rollout_id] = True
            raise
        return AgentWorkflowOutput(messages=[])


async def test_polling_stopped_the_lease_expires_and_the_workflow_is_cancelled() -> None:
    app = create_rollout_server(
        backend=LocalBackend(workflow=CountsItsCancellation),
        configure_logging=False,
        result_wait_timeout_sec=0.2,
        polling_lease_timeout_sec=0.6,
    )
    registry = app.state.rollout_server.registry
    body = {
        "rollout_id": "orphan",
        "initial_messages": [{"role": "user", "content": "hi"}],
        "chat_completions_url": "http://127.0.0.1:9/v1",
        "metadata": {"id": "orphan"},
        "grade": False,
    }
    async with rollout_server(app) as url, httpx.AsyncClient(base_url=url) as http:
        admitted = (await http.post("/rollout", json=body)).json()
        lease = {"X-Osmosis-Rollout-Lease": admitted["polling_lease_token"]}
        first = (await http.get("/rollout/orphan/result", headers=lease)).json()
        # ... and then the controller goes away: nobody polls any more.
        await eventually(lambda: registry.active == 0, "the rollout task to end", timeout=5)
        health = (await http.get("/health")).json()
        final = (await http.get("/rollout/orphan/result", headers=lease)).json()
    assert first["status"] == "running"
    assert _cancelled == {"orphan": True}, "the workflow itself saw the cancellation"
    assert health["lifecycle"]["active_rollouts"] == 0
    assert (final["status"], final["err_category"], final["err_message"]) == (
        "failure",
        "lease_expired",
        "polling lease expired",
    )


async def test_a_restart_seen_first_by_the_health_watcher_still_requeues_the_lost_rollouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The watcher looks every 50 ms, so it sees the new process before the rollouts' polls
    # (404 from the new process) reach the runner: those rollouts were still sent to the old
    # process, and must be sent again rather than stop the run.
    monkeypatch.setattr(servers_module, "HEALTH_INTERVAL_SEC", 0.05)
    rows = 16
    events_path = tmp_path / "out" / "run" / "events.jsonl"
    async with (
        rollout_server(demo_app(max_concurrent=4)) as old,
        rollout_server(demo_app(max_concurrent=4)) as new,
        proxy_to(old) as proxy,
    ):

        async def restart_after_four() -> None:
            await eventually(
                lambda: len(read_jsonl(events_path)) >= 4, "4 finished items", timeout=30
            )
            proxy.target_port = int(new.rsplit(":", 1)[1])  # the same address, a new process
            proxy.cut()

        restart = asyncio.ensure_future(restart_after_four())
        run = await run_session(
            tmp_path,
            multiply_rows(rows, metadata={"stub": "slow:0.5"}),
            servers=(proxy.url,),
            chat_url="stub",
            max_in_flight=4,
        )
        await restart
    assert run.summary.status == "complete", run.summary.problem
    assert any("restarted (its process_id changed)" in notice for notice in run.notices)
    events = read_jsonl(events_path)
    assert Counter(e["row_index"] for e in events) == Counter(range(rows))
    lost = [r for r in run.session.board if r.poll_error and "404" in r.poll_error]
    assert lost, "the old process's rollouts were reported lost on the board"
