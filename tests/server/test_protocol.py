"""The HTTP API of server_stub over a real uvicorn server (PROTOCOL.md §2, §5)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest

from server_stub import (
    AgentWorkflowConfig,
    ConcurrencyConfig,
    LocalBackend,
    create_rollout_server,
)
from tests.conftest import Serve
from tests.server.plugins import Echo, ExactMatch
from tests.server.rawhttp import Wire, raw_json

# `wire(**server_options)` or `wire(app, headers=...)`: a Wire against a fresh server.
Fixture = Callable[..., AbstractAsyncContextManager[Wire]]


def make_app(**options: Any) -> Any:
    backend_options = {
        key: options.pop(key) for key in ("max_pending", "workflow_config") if key in options
    }
    backend = LocalBackend(workflow=Echo, grader=ExactMatch, **backend_options)
    return create_rollout_server(backend=backend, **options)


@pytest.fixture
async def wire(serve: Serve) -> AsyncIterator[Fixture]:
    """`async with wire(**server_options) as w:` a Wire against a fresh server."""

    @asynccontextmanager
    async def start(
        app: Any = None, headers: dict[str, str] | None = None, **options: Any
    ) -> AsyncIterator[Wire]:
        app = app if app is not None else make_app(**options)
        async with serve(app) as url, httpx.AsyncClient(base_url=url, headers=headers) as http:
            yield Wire(http)

    yield start


# -- §2.2 health -----------------------------------------------------------------------------


async def test_health_merges_backend_keys_with_server_identity(wire: Fixture) -> None:
    async with wire() as w:
        body = (await w.http.get("/health")).json()
    assert body["status"] == "ok"
    assert body["concurrency"] == {"max_concurrent": 4, "queued": 0, "running": 0}
    assert body["instance_id"] == body["process_id"]
    assert len(body["process_id"]) == 32
    assert body["lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}


async def test_instance_id_comes_from_the_environment(
    wire: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("_OSMOSIS_ROLLOUT_INSTANCE_ID", "supervisor-marker")
    async with wire() as w:
        body = (await w.http.get("/health")).json()
    assert body["instance_id"] == "supervisor-marker"
    assert body["process_id"] != "supervisor-marker"


async def test_every_app_has_a_new_process_id() -> None:
    assert make_app().state.rollout_server.process_id != make_app().state.rollout_server.process_id


# -- §2.3 admission --------------------------------------------------------------------------


async def test_admission_answers_202_with_a_lease(wire: Fixture) -> None:
    async with wire(result_wait_timeout_sec=2, polling_lease_timeout_sec=5) as w:
        response = await w.admit("r1")
        body = response.json()
        assert response.status_code == 202
        assert body["rollout_id"] == "r1"
        assert body["status"] == "queued"
        assert len(body["polling_lease_token"]) == 43
        assert body["result_wait_timeout_sec"] == 2.0
        assert body["polling_lease_timeout_sec"] == 5.0
        _, final = await w.until_terminal("r1")
    assert final["status"] == "success"
    assert final["sample"]["reward"] == 1.0
    assert "trajectory_messages" not in final["sample"]


async def test_duplicate_id_is_409_while_active_and_while_retained(wire: Fixture) -> None:
    async with wire() as w:
        assert (await w.admit("dup", metadata={"sleep": 0.3})).status_code == 202
        active = await w.admit("dup")
        assert active.status_code == 409
        assert active.json() == {"detail": "rollout_id is already registered"}
        await w.until_terminal("dup")
        assert (await w.admit("dup")).status_code == 409


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("rollout_id", "a/b", "Value error, rollout_id must be a single path segment"),
        ("rollout_id", "..", "Value error, rollout_id must be a single path segment"),
        ("rollout_id", "a\\b", "Value error, rollout_id must be a single path segment"),
        ("rollout_id", "", "Value error, rollout_id must be a single path segment"),
        ("llm_api_key", "", "Value error, llm_api_key must be omitted or a non-empty string"),
    ],
)
async def test_admission_validators_answer_422(
    wire: Fixture, field: str, value: str, message: str
) -> None:
    async with wire() as w:
        response = await w.http.post(
            "/rollout",
            json={
                **{"rollout_id": "ok", "initial_messages": [], "chat_completions_url": "x"},
                field: value,
            },
        )
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert isinstance(detail, list)
    assert detail[0]["loc"] == ["body", field]
    assert detail[0]["msg"].startswith(message)


async def test_whitespace_llm_api_key_and_unknown_fields_are_accepted(wire: Fixture) -> None:
    async with wire() as w:
        response = await w.admit("ws", llm_api_key="  ", completion_callback_url="http://x")
    assert response.status_code == 202


async def test_missing_required_field_is_a_list_422(wire: Fixture) -> None:
    async with wire() as w:
        response = await w.http.post("/rollout", json={"rollout_id": "x"})
    assert response.status_code == 422
    locs = {tuple(item["loc"]) for item in response.json()["detail"]}
    assert locs == {("body", "initial_messages"), ("body", "chat_completions_url")}


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_non_finite_timeout_is_422_not_500(wire: Fixture, literal: str) -> None:
    raw = (
        '{"rollout_id":"nf","initial_messages":[],"chat_completions_url":"x",'
        f'"agent_timeout_sec":{literal}}}'
    )
    async with wire() as w:
        response = await w.http.post(
            "/rollout", content=raw, headers={"content-type": "application/json"}
        )
    assert response.status_code == 422
    assert response.json()["detail"][0]["msg"] == (
        "Value error, timeout must be finite; omit it to run unbounded"
    )


async def test_no_capacity_is_429_with_retry_after_and_precedes_duplicates(wire: Fixture) -> None:
    one_slot = AgentWorkflowConfig(name="t", concurrency=ConcurrencyConfig(max_concurrent=1))
    async with wire(workflow_config=one_slot, max_pending=1) as w:
        assert (await w.admit("a", metadata={"sleep": 0.5})).status_code == 202
        assert (await w.admit("b", metadata={"sleep": 0.5})).status_code == 202
        await asyncio.sleep(0.05)  # let b reach the slot queue
        full = await w.admit("c")
        assert full.status_code == 429
        assert full.headers["retry-after"] == "5"
        assert full.json() == {"detail": "rollout queue is full; retry later"}
        # capacity is checked before duplicates
        assert (await w.admit("a")).status_code == 429
        health = (await w.http.get("/health")).json()
        assert health["concurrency"] == {"max_concurrent": 1, "queued": 1, "running": 1}
        await w.until_terminal("a")
        await asyncio.sleep(0.05)
        assert (await w.admit("c")).status_code == 202


async def test_a_rollout_waiting_for_a_slot_reports_queued(wire: Fixture) -> None:
    one_slot = AgentWorkflowConfig(name="t", concurrency=ConcurrencyConfig(max_concurrent=1))
    async with wire(
        workflow_config=one_slot, result_wait_timeout_sec=0.2, polling_lease_timeout_sec=5
    ) as w:
        await w.admit("first", metadata={"sleep": 0.6})
        await w.admit("second")
        response = await w.poll("second")
        assert response.json()["status"] == "queued"
        _, final = await w.until_terminal("second")
    assert final["status"] == "success"


async def test_admission_is_recorded_before_the_response(wire: Fixture) -> None:
    async with wire() as w:
        await w.admit("early", metadata={"sleep": 0.3})
        app_state = w.http  # the registry is visible through health
        health = (await app_state.get("/health")).json()
    assert health["lifecycle"]["active_rollouts"] == 1


# -- §2.4 result -----------------------------------------------------------------------------


async def test_result_lease_header_rules(wire: Fixture) -> None:
    async with wire() as w:
        await w.admit("r")
        missing = await w.http.get("/rollout/r/result")
        empty = await w.poll("r", token="")
        unknown_missing = await w.http.get("/rollout/nope/result")
        unknown = await w.poll("nope", token="x")
        forbidden = await w.poll("r", token="not-the-token")
        await w.until_terminal("r")
        forbidden_finished = await w.poll("r", token="not-the-token")
    assert missing.status_code == 422
    assert missing.json()["detail"] == [
        {
            "type": "missing",
            "loc": ["header", "X-Osmosis-Rollout-Lease"],
            "msg": "Field required",
            "input": None,
        }
    ]
    assert empty.status_code == 422
    assert empty.json()["detail"][0]["type"] == "string_too_short"
    assert empty.json()["detail"][0]["ctx"] == {"min_length": 1}
    assert unknown_missing.status_code == 422
    assert unknown.status_code == 404
    assert unknown.json() == {"detail": "unknown rollout_id"}
    assert forbidden.status_code == 403
    assert forbidden.json() == {"detail": "invalid polling lease"}
    assert forbidden_finished.status_code == 403


async def test_long_poll_returns_at_the_first_status_change(wire: Fixture) -> None:
    async with wire(result_wait_timeout_sec=5, polling_lease_timeout_sec=10) as w:
        await w.admit("lp", metadata={"sleep": 0.3, "grade_sleep": 0.3})
        await asyncio.sleep(0.05)
        started = time.monotonic()
        first = (await w.poll("lp")).json()
        first_wait = time.monotonic() - started
        seen, final = await w.until_terminal("lp")
    assert first["status"] == "grading"  # running -> grading ended the wait
    assert first["sample"] is None and first["err_message"] is None
    assert 0.15 < first_wait < 2.0
    assert seen == ["success"]
    assert final["sample"]["reward"] == 1.0


async def test_long_poll_times_out_with_the_current_status(wire: Fixture) -> None:
    async with wire(result_wait_timeout_sec=0.3, polling_lease_timeout_sec=5) as w:
        await w.admit("slow", metadata={"sleep": 2})
        await asyncio.sleep(0.05)
        started = time.monotonic()
        body = (await w.poll("slow")).json()
        waited = time.monotonic() - started
    assert body == {
        "rollout_id": "slow",
        "status": "running",
        "sample": None,
        "err_message": None,
        "err_category": None,
    }
    assert waited >= 0.25


async def test_polling_renews_the_lease(wire: Fixture) -> None:
    async with wire(result_wait_timeout_sec=0.2, polling_lease_timeout_sec=0.5) as w:
        await w.admit("renewed", metadata={"sleep": 1.2})
        seen, final = await w.until_terminal("renewed")
    assert final["status"] == "success"
    assert seen.count("running") >= 3


async def test_lease_expiry_fails_then_cancels_execution(wire: Fixture) -> None:
    async with wire(result_wait_timeout_sec=0.2, polling_lease_timeout_sec=0.4) as w:
        await w.admit("expire", metadata={"sleep": 30})
        await asyncio.sleep(0.7)
        body = (await w.poll("expire")).json()
        health = (await w.http.get("/health")).json()
        again = await w.admit("expire")
    assert body == {
        "rollout_id": "expire",
        "status": "failure",
        "sample": None,
        "err_message": "polling lease expired",
        "err_category": "lease_expired",
    }
    assert health["lifecycle"]["active_rollouts"] == 0  # execution was cancelled
    assert again.status_code == 409


async def test_retention_removes_then_the_id_can_be_reused(wire: Fixture) -> None:
    async with wire(result_retention_sec=0.3) as w:
        await w.admit("keep")
        await w.until_terminal("keep")
        assert (await w.poll("keep")).status_code == 200
        await asyncio.sleep(0.5)
        assert (await w.poll("keep")).status_code == 404
        assert (await w.admit("keep")).status_code == 202
        _, final = await w.until_terminal("keep")
    assert final["status"] == "success"


# -- §2.5 cancel -----------------------------------------------------------------------------


async def test_cancel_by_ids_is_idempotent_and_ends_cancelled(wire: Fixture) -> None:
    async with wire(result_wait_timeout_sec=2, polling_lease_timeout_sec=5) as w:
        await w.admit("c1", metadata={"sleep": 30})
        await asyncio.sleep(0.05)
        first = (await w.cancel(ids=["c1", "ghost"])).json()
        _, final = await w.until_terminal("c1")
        second = (await w.cancel(ids=["c1"])).json()
    assert first == {"dispositions": {"c1": "cancelled_running", "ghost": "not_found"}}
    assert final["status"] == "cancelled"
    assert final["err_message"] == "cancelled"
    assert second == {"dispositions": {"c1": "not_found"}}


async def test_cancel_of_a_queued_rollout(wire: Fixture) -> None:
    one_slot = AgentWorkflowConfig(name="t", concurrency=ConcurrencyConfig(max_concurrent=1))
    async with wire(workflow_config=one_slot) as w:
        await w.admit("busy", metadata={"sleep": 0.5})
        await w.admit("waiting")
        await asyncio.sleep(0.05)
        answer = (await w.cancel(ids=["waiting"])).json()
        _, final = await w.until_terminal("waiting")
    assert answer == {"dispositions": {"waiting": "cancelled_queued"}}
    assert final["status"] == "cancelled"


async def test_cancel_by_prefix_and_all_lists_retained_ids(wire: Fixture) -> None:
    async with wire() as w:
        await w.admit("job-1", metadata={"sleep": 30})
        await w.admit("job-2", metadata={"sleep": 30})
        await w.admit("other", metadata={"sleep": 30})
        await w.admit("done")
        await w.until_terminal("done")
        await asyncio.sleep(0.05)
        by_prefix = (await w.cancel(prefix="job-")).json()
        everything = (await w.cancel(all=True)).json()
        empty_ids = (await w.cancel(ids=[])).json()
    assert by_prefix == {
        "dispositions": {"job-1": "cancelled_running", "job-2": "cancelled_running"}
    }
    assert everything["dispositions"]["done"] == "not_found"
    assert everything["dispositions"]["other"] == "cancelled_running"
    assert set(everything["dispositions"]) == {"job-1", "job-2", "other", "done"}
    assert empty_ids == {"dispositions": {}}


async def test_a_rollout_id_with_a_lone_surrogate_is_refused_and_cancel_keeps_answering(
    wire: Fixture,
) -> None:
    # Admitted, such an id made every cancel that selected it (all, a prefix) answer 500 for
    # the whole retention: its disposition cannot be written as UTF-8.
    lone = '{"rollout_id":"a\\udc80b","initial_messages":[],"chat_completions_url":"x"}'
    async with wire() as w:
        await w.admit("a-running", metadata={"sleep": 30})
        refused = await w.http.post("/rollout", **raw_json(lone))
        by_prefix = await w.cancel(prefix="a")
        everything = await w.cancel(all=True)
        by_id = await w.http.post("/rollout/cancel", **raw_json('{"ids":["a\\udc80b"]}'))
    assert refused.status_code == 422
    detail = refused.json()["detail"]
    assert detail[0]["loc"] == ["body", "rollout_id"]
    assert detail[0]["msg"] == (
        "Value error, rollout_id must be valid Unicode: it holds an unpaired surrogate "
        "('\\udc80'), which UTF-8 cannot encode"
    )
    assert detail[0]["input"] == "a\udc80b"  # sent back as JSON spells it
    assert by_prefix.status_code == everything.status_code == 200
    assert by_prefix.json() == {"dispositions": {"a-running": "cancelled_running"}}
    assert list(everything.json()["dispositions"]) == ["a-running"]
    # An id that only names a rollout (never admitted) is answered as well, as JSON spells it.
    assert by_id.status_code == 200, by_id.text
    assert by_id.json() == {"dispositions": {"a\udc80b": "not_found"}}


async def test_repeat_cancel_during_cleanup_returns_the_cached_disposition(wire: Fixture) -> None:
    from tests.server.plugins import SlowCleanup

    backend = LocalBackend(workflow=SlowCleanup)
    async with wire(app=create_rollout_server(backend=backend)) as w:
        await w.admit("cleanup", grade=False)
        await asyncio.sleep(0.05)
        first = (await w.cancel(ids=["cleanup"])).json()
        during = (await w.cancel(prefix="clean")).json()
        _, final = await w.until_terminal("cleanup")
        after = (await w.cancel(ids=["cleanup"])).json()
    assert first == during == {"dispositions": {"cleanup": "cancelled_running"}}
    assert final["status"] == "cancelled"
    assert after == {"dispositions": {"cleanup": "not_found"}}


@pytest.mark.parametrize(
    "selector",
    [{}, {"ids": ["a"], "prefix": "a"}, {"prefix": "a", "all": True}, {"ids": None, "all": False}],
)
async def test_cancel_needs_exactly_one_selector(wire: Fixture, selector: dict[str, Any]) -> None:
    async with wire() as w:
        response = await w.cancel(**selector)
    assert response.status_code == 422
    assert response.json() == {"detail": "pass exactly one selector: ids, prefix, or all"}


async def test_cancel_with_wrong_types_is_a_list_422(wire: Fixture) -> None:
    async with wire() as w:
        response = await w.cancel(ids="abc")
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list)


# -- §2.1 auth ---------------------------------------------------------------------------------


async def test_bearer_auth_guards_every_route(wire: Fixture) -> None:
    async with wire(api_key="s3cret") as w:
        for method, path in [
            ("GET", "/health"),
            ("POST", "/rollout"),
            ("GET", "/rollout/x/result"),
            ("POST", "/rollout/cancel"),
            ("GET", "/no/such/path"),
        ]:
            for header in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Authorization": "bearer s3cret"},
            ):
                response = await w.http.request(method, path, headers=header, content=b"{bad")
                assert response.status_code == 401, (method, path, header)
                assert response.json() == {"detail": "unauthorized"}
                assert "s3cret" not in response.text
        ok = await w.http.get("/health", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200


@pytest.mark.parametrize("key", ["", "   "])
def test_blank_api_key_is_refused_at_construction(key: str) -> None:
    with pytest.raises(ValueError, match="api_key must be non-empty when provided"):
        make_app(api_key=key)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"result_wait_timeout_sec": 0},
            "result_wait_timeout_sec must be finite and greater than zero",
        ),
        ({"result_wait_timeout_sec": float("inf")}, "result_wait_timeout_sec must be finite"),
        ({"result_retention_sec": -1}, "result_retention_sec must be finite and non-negative"),
        (
            {"polling_lease_timeout_sec": 30},
            "polling_lease_timeout_sec must exceed result_wait_timeout_sec",
        ),
        (
            {"polling_lease_timeout_sec": float("nan")},
            "timeout_sec must be finite and greater than zero",
        ),
    ],
)
def test_invalid_timing_is_refused_at_construction(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_app(**options)


# -- §5.8 shutdown -----------------------------------------------------------------------------


async def test_shutdown_refuses_admissions_but_keeps_polling(serve: Serve) -> None:
    app = make_app(result_wait_timeout_sec=2, polling_lease_timeout_sec=5)
    # Drive the app's lifespan by hand so that the server keeps serving while it drains.
    async with serve(app, lifespan="off") as url, httpx.AsyncClient(base_url=url) as http:
        w = Wire(http)
        lifespan = app.router.lifespan_context(app)
        await lifespan.__aenter__()
        await w.admit("inflight", metadata={"sleep": 0.5})
        drain = asyncio.create_task(lifespan.__aexit__(None, None, None))
        await asyncio.sleep(0.05)
        refused = await w.admit("late")
        health = (await http.get("/health")).json()
        _, final = await w.until_terminal("inflight")
        await drain
    assert refused.status_code == 503
    assert refused.json() == {"detail": "rollout server is shutting down"}
    assert health["lifecycle"]["accepting_rollouts"] is False
    assert final["status"] == "success"


async def test_user_lifespan_wraps_the_servers(serve: Serve) -> None:
    from contextlib import asynccontextmanager

    events: list[str] = []

    @asynccontextmanager
    async def user_lifespan(app: Any) -> AsyncIterator[None]:
        events.append("enter")
        yield
        events.append("exit")

    app = create_rollout_server(backend=LocalBackend(workflow=Echo), lifespan=user_lifespan)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as http:
        assert (await http.get("/health")).status_code == 200
        assert events == ["enter"]
    assert events == ["enter", "exit"]


async def test_max_pending_zero_admits_into_free_slots_only(wire: Fixture) -> None:
    one_slot = AgentWorkflowConfig(name="t", concurrency=ConcurrencyConfig(max_concurrent=1))
    async with wire(workflow_config=one_slot, max_pending=0) as w:
        assert (await w.admit("only", metadata={"sleep": 0.3})).status_code == 202
        await asyncio.sleep(0.05)
        assert (await w.admit("waits")).status_code == 429
        await w.until_terminal("only")
        assert (await w.admit("waits")).status_code == 202


async def test_observed_status_header_answers_at_once_when_the_status_moved_on(
    wire: Fixture,
) -> None:
    """Our extension: a poller that says what it last saw is not held past a change it missed."""
    async with wire(result_wait_timeout_sec=5, polling_lease_timeout_sec=10) as w:
        await w.admit("seen", metadata={"sleep": 2})
        await asyncio.sleep(0.1)  # now running on the server; the poller still thinks queued
        headers = {
            "X-Osmosis-Rollout-Lease": w.tokens["seen"],
            "X-Osmosis-Observed-Status": "queued",
        }
        started = time.monotonic()
        moved_on = await w.http.get("/rollout/seen/result", headers=headers)
        quick = time.monotonic() - started
        headers["X-Osmosis-Observed-Status"] = "running"
        started = time.monotonic()
        held = await w.http.get("/rollout/seen/result", headers=headers)
        waited = time.monotonic() - started
    assert moved_on.json()["status"] == "running"
    assert quick < 1.0
    assert held.json()["status"] == "grading"  # held until the next change
    assert waited > 1.0
