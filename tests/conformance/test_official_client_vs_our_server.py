"""The OFFICIAL osmosis-ai 0.3.8 RolloutClient against OUR rollout server (PROTOCOL.md §2, §5, §6).

Our servers run on this test module's event loop (real uvicorn on loopback ports). The official
client runs in the Python 3.12 conformance venv as one subprocess, `official_client_driver.py`,
which plays every scenario concurrently, each against its own freshly built server, and prints
one JSON line of observations per scenario. Each test below checks one scenario's observations.
Running everything in one subprocess pays the official package's import cost once.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from core.serving.loopback import serve_in_loop
from server_stub import (
    AgentWorkflowConfig,
    ConcurrencyConfig,
    LocalBackend,
    create_rollout_server,
)
from tests.conformance.venv import venv_env
from tests.server.plugins import Echo, ExactMatch

pytestmark = pytest.mark.conformance

DRIVER = Path(__file__).with_name("official_client_driver.py")
DRIVER_TIMEOUT_SEC = 120.0
API_KEY_ENV = "OSMOSIS_CONFORMANCE_API_KEY"
# Generated per session; handed to the driver through its environment, never on its argv.
API_KEY = secrets.token_urlsafe(24)

LIFECYCLE_ORDER = {"queued": 0, "running": 1, "grading": 2}
TERMINAL = frozenset({"success", "failure", "cancelled"})


def _one_at_a_time(max_pending: int | None = None) -> LocalBackend:
    return LocalBackend(
        workflow=Echo,
        workflow_config=AgentWorkflowConfig(
            name="conformance", concurrency=ConcurrencyConfig(max_concurrent=1)
        ),
        grader=ExactMatch,
        max_pending=max_pending,
    )


def _server(backend: LocalBackend | None = None, **options: Any) -> Any:
    backend = backend if backend is not None else LocalBackend(workflow=Echo, grader=ExactMatch)
    return create_rollout_server(backend=backend, configure_logging=False, **options)


# Scenario name (as the driver knows it) -> the server it runs against.
SERVERS: dict[str, Callable[[], Any]] = {
    "success": _server,
    "no_grade": _server,
    "wrong_answer": _server,
    "failures": _server,
    "duplicate": _server,
    "health": _server,
    "server_cancel": lambda: _server(_one_at_a_time()),
    "lease_expiry": lambda: _server(result_wait_timeout_sec=0.2, polling_lease_timeout_sec=0.6),
    # One slot, and room for one rollout waiting for it: a third admission gets 429.
    "backpressure": lambda: _server(_one_at_a_time(max_pending=1)),
    "auth": lambda: _server(api_key=API_KEY),
}


@dataclass
class DriverRun:
    returncode: int | None
    stdout: str
    stderr: str
    elapsed_sec: float
    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)

    def scenario(self, name: str) -> dict[str, Any]:
        """One scenario's observations; a readable failure when the driver could not play it."""
        observed = self.scenarios.get(name)
        if observed is None:
            pytest.fail(
                f"driver printed nothing for {name!r} (exit {self.returncode})\n"
                f"stderr:\n{self.stderr[-4000:]}",
                pytrace=False,
            )
        if "driver_error" in observed:
            pytest.fail(
                f"driver failed in {name!r}: {observed['driver_error']}\n"
                f"{observed.get('traceback', '')}\nstderr:\n{self.stderr[-4000:]}",
                pytrace=False,
            )
        return observed


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def driver_run(official_python: Path) -> DriverRun:
    """Start every scenario's server, run the official client through all of them once."""
    async with AsyncExitStack() as servers:
        argv: list[str] = []
        for scenario, build in SERVERS.items():
            url = await servers.enter_async_context(serve_in_loop(build()))
            argv += [url, scenario]
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            str(official_python),
            str(DRIVER),
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=venv_env(**{API_KEY_ENV: API_KEY}),
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), DRIVER_TIMEOUT_SEC)
        except asyncio.TimeoutError:  # not the builtin on Python 3.10
            process.kill()
            out, err = await process.communicate()
            pytest.fail(
                f"the official client driver did not finish within {DRIVER_TIMEOUT_SEC}s\n"
                f"stdout:\n{out.decode(errors='replace')}\nstderr:\n{err.decode(errors='replace')}",
                pytrace=False,
            )
        run = DriverRun(
            returncode=process.returncode,
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            elapsed_sec=time.monotonic() - started,
        )
    for line in run.stdout.splitlines():
        if line.strip():
            record = json.loads(line)
            run.scenarios[record.pop("scenario")] = record
    return run


LEASE_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")


def _strings(value: Any) -> list[str]:
    """Every string inside a JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def assert_progression(statuses: list[str], final: str) -> None:
    """Observed statuses never go backwards and end with exactly one terminal status."""
    assert statuses, "the client made no successful result poll"
    assert statuses[-1] == final, statuses
    lifecycle = statuses[:-1]
    assert all(s in LIFECYCLE_ORDER for s in lifecycle), statuses
    ranks = [LIFECYCLE_ORDER[s] for s in lifecycle]
    assert ranks == sorted(ranks), statuses


def assert_protocol_error(observed: dict[str, Any], message: str, status_code: int) -> None:
    error = observed.get("error")
    assert error is not None, f"expected RolloutProtocolError, got {observed}"
    assert error["type"] == "RolloutProtocolError"
    assert "RuntimeError" in error["mro"]
    assert error["message"] == message
    assert error["status_code"] == status_code


SUCCESS_MESSAGES = [
    {"role": "user", "content": "6*7?"},
    {"role": "assistant", "content": "42"},
]


# -- the driver process ----------------------------------------------------------------------


def test_driver_played_every_scenario_and_leaked_no_secret(driver_run: DriverRun) -> None:
    assert driver_run.returncode == 0, driver_run.stderr[-4000:]
    assert set(driver_run.scenarios) == set(SERVERS)
    assert API_KEY not in driver_run.stdout
    assert API_KEY not in driver_run.stderr
    # Lease tokens (43 url-safe characters) are reported only by their length.
    leaked = [s for s in _strings(driver_run.scenarios) if LEASE_TOKEN.fullmatch(s)]
    assert leaked == []
    # Sanity bound only: the slowest scenario waits out one Retry-After of 5 s.
    assert driver_run.elapsed_sec < DRIVER_TIMEOUT_SEC


# -- results ---------------------------------------------------------------------------------


def test_success_with_reward(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("success")
    assert seen["admission"] == {
        "rollout_id": "conf-success",
        "keys": [
            "polling_lease_timeout_sec",
            "polling_lease_token",
            "result_wait_timeout_sec",
            "rollout_id",
            "status",
        ],
        "status": "queued",
        "token_length": 43,
        "result_wait_timeout_sec": 30.0,
        "polling_lease_timeout_sec": 120.0,
    }
    assert seen["initial_status"] == "queued"
    assert seen["wait_for_running"] in ("running", "grading", "success")
    assert seen["handle_status"] == "success"
    assert seen["handle_done"] is True
    assert seen["same_result_object"] is True
    result = seen["result"]
    assert result["type"] == "RolloutResultResponse"
    assert result["rollout_id"] == "conf-success"
    assert result["status"] == "success"
    assert result["reward"] == 1.0
    assert result["err_message"] is None
    assert result["err_category"] is None
    assert result["sample"] == {
        "messages": SUCCESS_MESSAGES,
        "label": "42",
        "reward": 1.0,
        "remove_sample": False,
        "metrics": {"steps": 1.0},
        "extra_fields": {},
    }
    # The official client's quirk: it re-creates trajectory_messages although none was sent.
    assert result["client_trajectory_messages_present"] is True
    assert_progression(seen["observed"], "success")
    # run_rollout (admission + awaiting in one call) gives the same kind of result.
    direct = seen["run_rollout"]["value"]
    assert (direct["rollout_id"], direct["status"], direct["reward"]) == (
        "conf-success-direct",
        "success",
        1.0,
    )


def test_grade_false_skips_grading_and_has_no_reward(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("no_grade")
    result = seen["result"]
    assert result["status"] == "success"
    assert result["reward"] is None
    assert result["err_message"] is None
    assert result["err_category"] is None
    assert result["sample"]["messages"] == SUCCESS_MESSAGES
    assert result["sample"]["label"] == "42"
    assert "grading" not in seen["observed"]
    assert_progression(seen["observed"], "success")
    # Grading never happens, so the grading threshold is met by the terminal status.
    assert seen["wait_for_grading"] == "success"


def test_wrong_answer_gets_reward_zero(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("wrong_answer")
    result = seen["result"]
    assert result["status"] == "success"
    assert result["reward"] == 0.0
    assert result["sample"]["messages"][-1] == {"role": "assistant", "content": "41"}
    assert (result["err_message"], result["err_category"]) == (None, None)
    assert_progression(seen["observed"], "success")


def test_workflow_failures_carry_category_and_message(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("failures")
    expected = {
        "value_error": ("conf-fail-value", "bad value", "validation_error"),
        "runtime_error": ("conf-fail-runtime", "boom", "agent_error"),
        "user_timeout": ("conf-fail-user-timeout", "too slow", "timeout"),
        "deadline": ("conf-fail-deadline", "workflow exceeded its 0.2s deadline", "timeout"),
    }
    for case, (rollout_id, message, category) in expected.items():
        result = seen[case]["value"]
        assert result["rollout_id"] == rollout_id, case
        assert result["status"] == "failure", case
        assert result["err_message"] == message, case
        assert result["err_category"] == category, case
        assert result["sample"] is None, case
        assert result["reward"] is None, case
    # Sanity bound: the 0.2 s deadline stopped a workflow that would have slept 5 s.
    assert seen["deadline"]["elapsed_sec"] < 4.0


# -- cancellation ----------------------------------------------------------------------------


def test_server_cancel_then_await_gives_cancelled(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("server_cancel")
    assert seen["busy_concurrency"] == {"max_concurrent": 1, "queued": 1, "running": 1}
    assert seen["cancel_queued"] == {"dispositions": {"conf-cancel-queued": "cancelled_queued"}}
    assert seen["cancel_running"] == {"dispositions": {"conf-cancel-running": "cancelled_running"}}
    for key, rollout_id in (
        ("running_result", "conf-cancel-running"),
        ("queued_result", "conf-cancel-queued"),
    ):
        result = seen[key]
        assert result["rollout_id"] == rollout_id
        assert result["status"] == "cancelled"
        assert result["err_message"] == "cancelled"
        assert result["err_category"] is None
        assert result["sample"] is None
    assert_progression(seen["running_observed"], "cancelled")
    assert_progression(seen["queued_observed"], "cancelled")
    # The workflows would sleep 30 s; the cancelled results came long before that.
    assert seen["cancelled_after_sec"] < 10.0
    # Once the terminal result is published, cancelling again (or an unknown id) is not_found.
    assert seen["repeat_cancel"] == {
        "conf-cancel-running": {"dispositions": {"conf-cancel-running": "not_found"}},
        "conf-cancel-queued": {"dispositions": {"conf-cancel-queued": "not_found"}},
        "conf-never-admitted": {"dispositions": {"conf-never-admitted": "not_found"}},
    }
    assert seen["idle_lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}


def test_duplicate_rollout_id_is_a_409_protocol_error(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("duplicate")
    message = "POST /rollout returned 409; only 202 and 429 are accepted"
    assert_protocol_error(seen["while_active"], message, 409)
    assert_protocol_error(seen["while_retained"], message, 409)
    assert seen["first_result"]["status"] == "success"
    assert seen["first_result"]["reward"] == 1.0
    assert seen["post_statuses"] == [202, 409, 409]
    assert seen["post_details"] == [
        None,
        "rollout_id is already registered",
        "rollout_id is already registered",
    ]


def test_lease_expires_after_the_client_stops_polling(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("lease_expiry")
    assert seen["admission"]["result_wait_timeout_sec"] == 0.2
    assert seen["admission"]["polling_lease_timeout_sec"] == 0.6
    assert seen["wait_for_running"] == "running"
    assert seen["handle_cancel_returned"] is True
    assert seen["awaited_after_cancel"]["type"] == "CancelledError"
    assert seen["handle_done"] is True
    lease_failure = {
        "rollout_id": "conf-lease",
        "status": "failure",
        "sample": None,
        "err_message": "polling lease expired",
        "err_category": "lease_expired",
    }
    assert seen["expired"] == {"status_code": 200, "body": lease_failure}
    # A finished lease never expires but keeps authenticating.
    assert seen["expired_again"] == {"status_code": 200, "body": lease_failure}
    assert seen["wrong_token"] == {"status_code": 403, "body": {"detail": "invalid polling lease"}}
    missing = seen["missing_header"]
    assert missing["status_code"] == 422
    assert [(d["type"], d["loc"]) for d in missing["body"]["detail"]] == [
        ("missing", ["header", "X-Osmosis-Rollout-Lease"])
    ]
    assert seen["unknown"] == {"status_code": 404, "body": {"detail": "unknown rollout_id"}}
    # The id stays reserved after the lease failure.
    assert_protocol_error(
        seen["readmit"], "POST /rollout returned 409; only 202 and 429 are accepted", 409
    )
    # Expiry cancelled the 30 s workflow: the server became idle.
    assert seen["idle_lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}
    # A rollout that outlives several lease periods survives while the client keeps polling.
    renewed = seen["renewed"]
    assert renewed["result"]["status"] == "success"
    assert renewed["result"]["reward"] == 1.0
    assert renewed["polls"] >= 3


# -- backpressure ----------------------------------------------------------------------------


def test_429_retry_after_and_admission_deadline(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("backpressure")
    assert seen["full_concurrency"] == {"max_concurrent": 1, "queued": 1, "running": 1}
    assert seen["raw_full"] == {
        "status_code": 429,
        "retry_after": "5",
        "body": {"detail": "rollout queue is full; retry later"},
    }
    # Capacity is checked before duplicates.
    assert seen["raw_duplicate"] == {
        "status_code": 429,
        "body": {"detail": "rollout queue is full; retry later"},
    }

    # A deadline shorter than Retry-After: it fires during the sleep, so no "may have succeeded".
    impatient = seen["impatient"]["error"]
    assert impatient["type"] == "RolloutAdmissionTimeoutError"
    assert "TimeoutError" in impatient["mro"]
    assert (
        impatient["message"]
        == "admission for rollout conf-bp-impatient timed out after 1.0 seconds"
    )
    assert seen["impatient_posts"] == [429]
    assert 0.9 <= seen["impatient"]["elapsed_sec"] < 4.0
    assert seen["impatient_never_admitted"] == {
        "status_code": 404,
        "body": {"detail": "unknown rollout_id"},
    }

    # A longer deadline: one 429, the client sleeps Retry-After (5 s), then gets its 202.
    assert seen["patient_posts"] == [
        {"status_code": 429, "retry_after": "5"},
        {"status_code": 202, "retry_after": None},
    ]
    patient = seen["patient"]
    assert 4.5 <= patient["admitted_after_sec"] < 15.0
    assert patient["result"]["status"] == "success"
    assert patient["result"]["reward"] == 1.0
    for key in ("first_result", "waiting_result"):
        assert seen[key]["status"] == "success", key
        assert seen[key]["reward"] == 1.0, key


# -- health ----------------------------------------------------------------------------------


def test_health_and_wait_idle(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("health")
    before = seen["before"]
    assert set(before) == {"status", "concurrency", "instance_id", "process_id", "lifecycle"}
    assert before["status"] == "ok"
    assert before["concurrency"] == {"max_concurrent": 4, "queued": 0, "running": 0}
    assert isinstance(before["process_id"], str) and before["process_id"]
    assert before["instance_id"] == before["process_id"]
    assert before["lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}

    busy = seen["busy"]
    assert busy["lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 1}
    assert busy["concurrency"] == {"max_concurrent": 4, "queued": 0, "running": 1}
    assert busy["process_id"] == before["process_id"]

    assert seen["idle"]["lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}
    assert seen["idle"]["process_id"] == before["process_id"]
    assert seen["result"]["status"] == "success"
    assert seen["same_process"]["value"]["process_id"] == before["process_id"]
    error = seen["restarted"]["error"]
    assert error["type"] == "RolloutProtocolError"
    assert (error["message"], error["status_code"]) == ("Server restarted while waiting", 200)


# -- auth ------------------------------------------------------------------------------------


def test_bearer_auth(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("auth")
    health = seen["good_health"]["value"]
    assert health["status"] == "ok"
    assert health["lifecycle"]["accepting_rollouts"] is True
    result = seen["good_result"]["value"]
    assert (result["rollout_id"], result["status"], result["reward"]) == (
        "conf-auth",
        "success",
        1.0,
    )
    assert seen["good_cancel"]["value"] == {"dispositions": {"conf-auth": "not_found"}}
    assert seen["good_idle"]["value"]["lifecycle"]["active_rollouts"] == 0

    assert_protocol_error(seen["bad_health"], "GET /health failed", 401)
    assert_protocol_error(
        seen["bad_admission"], "POST /rollout returned 401; only 202 and 429 are accepted", 401
    )
    assert_protocol_error(seen["bad_cancel"], "POST /rollout/cancel returned 401", 401)
    # wait_idle retries only 408/429/5xx: a 401 ends it at once.
    assert_protocol_error(seen["bad_wait_idle"], "GET /health failed", 401)
    assert seen["bad_wait_idle"]["elapsed_sec"] < 4.0
    assert_protocol_error(seen["anonymous_health"], "GET /health failed", 401)
