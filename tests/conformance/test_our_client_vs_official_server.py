"""OUR RolloutClient against the OFFICIAL osmosis-ai 0.3.8 rollout server (PROTOCOL.md §2, §4-§6).

Both run inside the Python 3.12 conformance venv, which also proves our client works on 3.12:

- `official_server_entry.py` is an official server (`create_rollout_server` around an official
  backend, a workflow and grader written against the official plug-in API) served by uvicorn.
  One process per scenario group, each with its own timing knobs, all started concurrently.
- `our_client_driver.py` plays every scenario concurrently with `core.client.RolloutClient`
  and prints one JSON line of observations per scenario. Each test below checks one scenario.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.conformance.official_servers import OfficialServer, official_server
from tests.conformance.venv import venv_env

pytestmark = pytest.mark.conformance

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DRIVER = HERE / "our_client_driver.py"
DRIVER_TIMEOUT_SEC = 120.0
API_KEY_ENV = "OSMOSIS_CONFORMANCE_API_KEY"
# Generated per session; handed over through the environment, never on an argv.
API_KEY = secrets.token_urlsafe(24)

# Server group -> (entrypoint options, the driver scenarios played against it). Scenarios on
# one server use distinct rollout ids and assert nothing about the server's global counters.
GROUPS: dict[str, tuple[list[str], list[str]]] = {
    "plain": ([], ["success", "no_grade", "duplicate"]),
    "failures": ([], ["failures"]),
    "one_slot": (["--backend", "one_slot"], ["server_cancel"]),
    "short_lease": (
        ["--result-wait-timeout-sec", "0.2", "--polling-lease-timeout-sec", "0.6"],
        ["local_cancel", "lease_expiry"],
    ),
    "no_capacity": (["--backend", "no_capacity_while_busy"], ["backpressure"]),
    "health": ([], ["health"]),
    "auth": (["--auth"], ["auth"]),
}
SCENARIOS = [scenario for _, names in GROUPS.values() for scenario in names]

LIFECYCLE_ORDER = {"queued": 0, "running": 1, "grading": 2}
PHASE_ORDER = {**LIFECYCLE_ORDER, "success": 3}
SUCCESS_MESSAGES = [
    {"role": "user", "content": "6*7?"},
    {"role": "assistant", "content": "42"},
]


@dataclass
class DriverRun:
    returncode: int | None
    stdout: str
    stderr: str
    elapsed_sec: float
    servers: dict[str, OfficialServer]
    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)

    def server_logs(self) -> str:
        return "\n".join(
            f"--- {name} ---\n{server.log_path.read_text(errors='replace')[-2000:]}"
            for name, server in self.servers.items()
            if server.log_path.exists()
        )

    def scenario(self, name: str) -> dict[str, Any]:
        """One scenario's observations; a readable failure when the driver could not play it."""
        observed = self.scenarios.get(name)
        if observed is None:
            pytest.fail(
                f"driver printed nothing for {name!r} (exit {self.returncode})\n"
                f"stderr:\n{self.stderr[-4000:]}\nserver logs:\n{self.server_logs()}",
                pytrace=False,
            )
        if "driver_error" in observed:
            pytest.fail(
                f"driver failed in {name!r}: {observed['driver_error']}\n"
                f"{observed.get('traceback', '')}\nstderr:\n{self.stderr[-4000:]}\n"
                f"server logs:\n{self.server_logs()}",
                pytrace=False,
            )
        return observed


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def driver_run(official_python: Path, tmp_path_factory: pytest.TempPathFactory) -> DriverRun:
    """Start every group's official server, then play all scenarios with our client once."""
    workdir = tmp_path_factory.mktemp("our-client-vs-official-server")
    async with AsyncExitStack() as stack:
        started = await asyncio.gather(
            *(
                stack.enter_async_context(
                    official_server(
                        official_python,
                        group,
                        opts,
                        workdir,
                        {API_KEY_ENV: API_KEY} if "--auth" in opts else None,
                    )
                )
                for group, (opts, _) in GROUPS.items()
            )
        )
        servers = {server.group: server for server in started}
        argv: list[str] = []
        for group, (_, names) in GROUPS.items():
            for name in names:
                argv += [servers[group].url, name]
        began = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            str(official_python),
            str(DRIVER),
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=workdir,  # not the repo: `core` must come from the venv's editable install
            env=venv_env(**{API_KEY_ENV: API_KEY}),
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), DRIVER_TIMEOUT_SEC)
        except asyncio.TimeoutError:
            process.kill()
            out, err = await process.communicate()
            pytest.fail(
                f"our client driver did not finish within {DRIVER_TIMEOUT_SEC}s\n"
                f"stdout:\n{out.decode(errors='replace')}\nstderr:\n{err.decode(errors='replace')}",
                pytrace=False,
            )
        run = DriverRun(
            returncode=process.returncode,
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            elapsed_sec=time.monotonic() - began,
            servers=servers,
        )
    for line in run.stdout.splitlines():
        if line.strip():
            record = json.loads(line)
            run.scenarios[record.pop("scenario")] = record
    return run


# -- helpers ---------------------------------------------------------------------------------

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


def expected_transitions(admission_status: str, observed: list[str]) -> list[str]:
    """The admission status, then every change in what the polls returned."""
    transitions = [admission_status]
    for status in observed:
        if status != transitions[-1]:
            transitions.append(status)
    return transitions


def expected_skips(transitions: list[str], final: str, *, grade: bool) -> dict[str, str]:
    """The documented rule of `RolloutHandle.skipped_phases()` for a finished rollout whose
    result proves nothing beyond what was observed (successes and cancellations)."""
    seen = set(transitions)
    furthest = max((PHASE_ORDER[s] for s in seen if s in PHASE_ORDER), default=-1)
    skipped: dict[str, str] = {}
    for phase in ("queued", "running", "grading"):
        if phase in seen:
            continue
        if phase == "grading" and not grade:
            skipped[phase] = "not_requested"
        elif PHASE_ORDER[phase] < furthest:
            skipped[phase] = "not_observed"
        elif final in ("failure", "cancelled"):
            skipped[phase] = "ended_early"
    return skipped


def assert_handle_matches_wire(
    handle: dict[str, Any], observed: list[str], final: str, *, grade: bool = True
) -> None:
    """Our handle's additions agree with the statuses its polls actually received."""
    assert handle["status"] == final
    assert handle["latest_status"] == final
    assert handle["done"] is True
    assert handle["polling_finished"] is True
    assert handle["grade"] is grade
    assert handle["polls"] == len(observed)
    assert handle["poll_retries"] == 0
    assert handle["last_poll_error"] is None
    assert handle["transitions"] == expected_transitions("queued", observed)
    assert handle["transition_times_ordered"] is True
    assert handle["skipped_phases"] == expected_skips(handle["transitions"], final, grade=grade)


def assert_protocol_error(observed: dict[str, Any], message: str, status_code: int) -> None:
    error = observed.get("error")
    assert error is not None, f"expected RolloutProtocolError, got {observed}"
    assert error["type"] == "RolloutProtocolError"
    assert "RuntimeError" in error["mro"]
    assert error["message"] == message
    assert error["status_code"] == status_code


def assert_cancelled_error(observed: dict[str, Any]) -> None:
    assert observed["type"] == "CancelledError", observed


LEASE_FAILURE_BODY = {
    "status": "failure",
    "sample": None,
    "err_message": "polling lease expired",
    "err_category": "lease_expired",
}


# -- the processes ---------------------------------------------------------------------------


def test_driver_played_every_scenario_on_python_312(driver_run: DriverRun) -> None:
    assert driver_run.returncode == 0, driver_run.stderr[-4000:]
    assert set(driver_run.scenarios) == set(SCENARIOS)
    for name in SCENARIOS:
        seen = driver_run.scenario(name)
        assert seen["python"].startswith("3.12."), name
        # Our client, as installed (editable) into the official package's venv.
        assert Path(seen["core_module"]).resolve() == REPO / "core" / "__init__.py"
    assert API_KEY not in driver_run.stdout
    assert API_KEY not in driver_run.stderr
    leaked = [s for s in _strings(driver_run.scenarios) if LEASE_TOKEN.fullmatch(s)]
    assert leaked == []
    # Sanity bound only: the slowest scenario waits out one Retry-After of 5 s.
    assert driver_run.elapsed_sec < 30.0


def test_official_server_kept_artifacts_under_the_given_root(driver_run: DriverRun) -> None:
    driver_run.scenario("success")
    root = driver_run.servers["plain"].artifact_root
    assert (root / "ours-success" / "trajectory.json").is_file()
    assert (root / "ours-success" / "artifacts").is_dir()


# -- results ---------------------------------------------------------------------------------


def test_success_with_reward(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("success")
    assert seen["admission"] == {
        "rollout_id": "ours-success",
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
    assert seen["initial_transitions"] == ["queued"]
    assert seen["wait_for_running"] in ("running", "grading", "success")
    assert seen["same_result_object"] is True
    assert seen["latest_is_result"] is True
    result = seen["result"]
    assert result["type"] == "RolloutResultResponse"
    assert result["rollout_id"] == "ours-success"
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
    assert_progression(seen["observed"], "success")
    assert seen["result_gets_answered"] == len(seen["observed"])
    assert_handle_matches_wire(seen["handle"], seen["observed"], "success")

    direct = seen["run_rollout"]["value"]
    assert (direct["rollout_id"], direct["status"], direct["reward"]) == (
        "ours-success-direct",
        "success",
        1.0,
    )
    wrong = seen["wrong_answer"]["value"]
    assert (wrong["status"], wrong["reward"], wrong["sample"]["reward"]) == ("success", 0.0, 0.0)
    assert wrong["sample"]["messages"][-1] == {"role": "assistant", "content": "41"}


def test_grade_false_skips_grading_and_has_no_reward(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("no_grade")
    result = seen["result"]
    assert result["status"] == "success"
    assert result["reward"] is None
    assert result["err_message"] is None
    assert result["err_category"] is None
    assert result["sample"] == {
        "messages": SUCCESS_MESSAGES,
        "label": "42",
        "reward": None,
        "remove_sample": False,
        "metrics": {"steps": 1.0},
        "extra_fields": {},
    }
    # No grading phase: wait_for_grading() returns the terminal status instead.
    assert seen["wait_for_grading"] == "success"
    assert "grading" not in seen["observed"]
    assert_progression(seen["observed"], "success")
    assert_handle_matches_wire(seen["handle"], seen["observed"], "success", grade=False)
    assert seen["handle"]["skipped_phases"]["grading"] == "not_requested"


def test_workflow_failures(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("failures")
    expected = {
        "value_error": ("ours-fail-value", "validation_error", "bad value"),
        "runtime_error": ("ours-fail-runtime", "agent_error", "it broke"),
        "user_timeout": ("ours-fail-user-timeout", "timeout", "too slow"),
        "deadline": ("ours-fail-deadline", "timeout", "workflow exceeded its 0.2s deadline"),
    }
    for case, (rollout_id, category, message) in expected.items():
        value = seen[case]["value"]
        assert value["rollout_id"] == rollout_id, case
        assert value["status"] == "failure", case
        assert value["err_category"] == category, case
        assert value["err_message"] == message, case
        assert value["sample"] is None, case
        assert value["reward"] is None, case
        handle = seen[case]["handle"]
        assert handle["status"] == "failure", case
        assert handle["transitions"][0] == "queued", case
        assert handle["transitions"][-1] == "failure", case
        assert "grading" not in handle["transitions"], case
        # The workflow failed, so grading never came: that is "ended early", not "skipped".
        assert handle["skipped_phases"]["grading"] == "ended_early", case
        # A workflow's own error proves it ran: running was at worst not observed (the
        # official server holds a poll that arrives after running began), never "ended early".
        assert handle["skipped_phases"].get("running") in (None, "not_observed"), case
    assert 0.2 <= seen["deadline"]["total_sec"] < 4.0


# -- cancellation ----------------------------------------------------------------------------


def test_server_cancel(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("server_cancel")
    assert seen["busy_concurrency"] == {"max_concurrent": 1, "queued": 1, "running": 1}
    # The official server marks a rollout `running` as soon as its task starts, before the
    # LocalBackend's semaphore, so one waiting for the slot is cancelled as running too.
    assert seen["cancel_waiting"]["value"] == {
        "dispositions": {"ours-cancel-waiting": "cancelled_running"}
    }
    assert seen["cancel_running"]["value"] == {
        "dispositions": {"ours-cancel-running": "cancelled_running"}
    }
    for key, rollout_id in (
        ("running", "ours-cancel-running"),
        ("waiting", "ours-cancel-waiting"),
    ):
        assert seen[f"{key}_result"]["value"] == {
            "rollout_id": rollout_id,
            "status": "cancelled",
            "sample": None,
            "err_message": "cancelled",
            "err_category": None,
            "reward": None,
            "type": "RolloutResultResponse",
        }, key
        observed = seen[f"{key}_observed"]
        assert_progression(observed, "cancelled")
        assert_handle_matches_wire(seen[f"{key}_handle"], observed, "cancelled")
        assert seen[f"{key}_handle"]["skipped_phases"]["grading"] == "ended_early"
    # The 30 s workflows stopped at once.
    assert seen["cancelled_after_sec"] < 5.0
    # Once the cancelled result is published, cancelling again (or an unknown id) is not_found.
    assert {rid: seen["repeat_cancel"][rid]["value"] for rid in seen["repeat_cancel"]} == {
        rid: {"dispositions": {rid: "not_found"}}
        for rid in ("ours-cancel-running", "ours-cancel-never-admitted")
    }
    assert seen["idle_lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}


def test_local_cancel_sends_nothing_and_wakes_waiters(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("local_cancel")
    assert seen["cancel_posts"] == 0

    # Cancelled before its polling task ran, with waiters queued: the official handle leaves
    # such waiters hanging (PROTOCOL.md §6.2); ours wakes them with CancelledError.
    early = seen["early"]
    assert early["cancel_returned"] is True
    assert_cancelled_error(early["awaited"])
    assert [w["type"] for w in early["waiters"]] == ["CancelledError", "CancelledError"]
    assert_cancelled_error(early["wait_after_cancel"])
    handle = early["handle"]
    assert (handle["done"], handle["polling_finished"]) == (True, True)
    assert handle["status"] == "queued"
    assert handle["transitions"] == ["queued"]
    assert handle["polls"] == 0
    assert handle["latest_status"] is None
    assert early["result_requests_sent"] == 0
    # Never polled and never cancelled on the server: its lease ran out.
    assert early["server_result"] == {
        "status_code": 200,
        "body": {"rollout_id": "ours-local-early", **LEASE_FAILURE_BODY},
    }

    # Cancelled while a poll was in flight, with a wait_for_grading() pending.
    late = seen["late"]
    assert late["reached"] == "running"
    assert late["waiter_pending_before_cancel"] is True
    assert late["cancel_returned"] is True
    assert late["cancel_again_returned"] is False
    assert_cancelled_error(late["awaited"])
    assert_cancelled_error(late["waiter"])
    assert late["handle"]["status"] == "running"
    assert (late["handle"]["done"], late["handle"]["polling_finished"]) == (True, True)
    assert late["requests_after_cancel"] == []
    assert late["server_result"] == {
        "status_code": 200,
        "body": {"rollout_id": "ours-local-late", **LEASE_FAILURE_BODY},
    }


def test_duplicate_rollout_id(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("duplicate")
    message = "POST /rollout returned 409; only 202 and 429 are accepted"
    assert_protocol_error(seen["while_active"], message, 409)
    assert seen["first_result"]["status"] == "success"
    assert seen["first_result"]["reward"] == 1.0
    assert_protocol_error(seen["while_retained"], message, 409)
    assert seen["post_statuses"] == [202, 409, 409]
    assert seen["post_details"] == [
        None,
        "rollout_id is already registered",
        "rollout_id is already registered",
    ]


# -- leases ----------------------------------------------------------------------------------


def test_polling_lease_expiry_and_renewal(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("lease_expiry")
    assert seen["admission"]["result_wait_timeout_sec"] == 0.2
    assert seen["admission"]["polling_lease_timeout_sec"] == 0.6
    assert seen["wait_for_running"] == "running"
    assert seen["handle_cancel_returned"] is True
    assert_cancelled_error(seen["awaited_after_cancel"])
    assert seen["handle"]["done"] is True
    lease_failure = {"rollout_id": "ours-lease", **LEASE_FAILURE_BODY}
    assert seen["expired"] == {"status_code": 200, "body": lease_failure}
    # A finished lease never expires but keeps authenticating.
    assert seen["expired_again"] == {"status_code": 200, "body": lease_failure}
    assert seen["wrong_token"] == {"status_code": 403, "body": {"detail": "invalid polling lease"}}
    # The id stays reserved after the lease failure.
    assert_protocol_error(
        seen["readmit"], "POST /rollout returned 409; only 202 and 429 are accepted", 409
    )
    # Expiry cancelled the 30 s workflow: the server became idle.
    assert seen["idle_lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}
    # A rollout outliving several lease periods survives while our client keeps polling.
    renewed = seen["renewed"]
    assert renewed["result"]["status"] == "success"
    assert renewed["result"]["reward"] == 1.0
    assert renewed["polls"] >= 3
    assert renewed["handle"]["poll_retries"] == 0
    assert renewed["handle"]["polls"] == renewed["polls"]


# -- backpressure ----------------------------------------------------------------------------


def test_429_retry_after_and_admission_deadline(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("backpressure")
    assert seen["busy_in_flight"] == 1
    assert seen["raw_full"] == {
        "status_code": 429,
        "retry_after": "5",
        "body": {"detail": "rollout queue is full; retry later"},
    }

    # Deadlines shorter than Retry-After fire during the sleep: no "may have succeeded" suffix,
    # and the deadline is printed as it was given.
    for key, rollout_id, shown in (
        ("impatient_int", "ours-bp-impatient", "1"),
        ("impatient_float", "ours-bp-impatient-f", "1.0"),
    ):
        error = seen[key]["error"]
        assert error["type"] == "RolloutAdmissionTimeoutError", key
        assert "TimeoutError" in error["mro"], key
        assert error["message"] == (
            f"admission for rollout {rollout_id} timed out after {shown} seconds"
        ), key
        assert seen[f"{key}_posts"] == [429], key
        assert 0.9 <= seen[key]["elapsed_sec"] < 4.0, key
    assert seen["impatient_never_admitted"] == {
        "status_code": 404,
        "body": {"detail": "unknown rollout_id"},
    }

    # A longer deadline: one 429, our client sleeps Retry-After (5 s), then gets its 202.
    assert seen["patient_posts"] == [
        {"status_code": 429, "retry_after": "5"},
        {"status_code": 202, "retry_after": None},
    ]
    patient = seen["patient"]
    assert 4.5 <= patient["admitted_after_sec"] < 15.0
    assert patient["result"]["status"] == "success"
    assert patient["result"]["reward"] == 1.0
    assert seen["first_result"]["status"] == "success"
    assert seen["first_result"]["reward"] == 1.0


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
    bad = seen["bad_interval"]["error"]
    assert (bad["type"], bad["message"]) == (
        "ValueError",
        "wait timeouts must be positive and finite",
    )


# -- auth ------------------------------------------------------------------------------------


def test_bearer_auth(driver_run: DriverRun) -> None:
    seen = driver_run.scenario("auth")
    health = seen["good_health"]["value"]
    assert health["status"] == "ok"
    assert health["lifecycle"]["accepting_rollouts"] is True
    result = seen["good_result"]["value"]
    assert (result["rollout_id"], result["status"], result["reward"]) == (
        "ours-auth",
        "success",
        1.0,
    )
    assert seen["good_cancel"]["value"] == {"dispositions": {"ours-auth": "not_found"}}
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
