"""Drive an OFFICIAL osmosis-ai 0.3.8 rollout server with OUR client and report what it saw.

Runs inside the Python 3.12 conformance venv (see venv.py), where this project is installed
editable next to the official package, as a subprocess of the test:

    python our_client_driver.py URL SCENARIO [URL SCENARIO ...]

Each (URL, SCENARIO) pair runs concurrently; each prints one JSON line
`{"scenario": SCENARIO, "python": "3.12.x", ...observations}` on stdout when it finishes. A
scenario that crashes prints `{"scenario": SCENARIO, "driver_error": {...}}` instead, so one bug
does not hide the other observations. The server API key for the `auth` scenario comes from
the environment variable OSMOSIS_CONFORMANCE_API_KEY and is never printed; neither are lease
tokens.

The client under test is `core.client.RolloutClient`; the only official names used here are
the wire constants the servers share (the lease header), taken from `core.types`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

import core
from core.client import RolloutClient
from core.handle import RolloutHandle
from core.types import POLLING_LEASE_HEADER, RolloutResultResponse

API_KEY_ENV = "OSMOSIS_CONFORMANCE_API_KEY"
WRONG_API_KEY = "definitely-not-the-server-key"
# Handed to the server as the rollout's chat endpoint; the entrypoint's workflow never calls it.
CHAT_URL = "http://127.0.0.1:9/v1"
PROMPT: list[dict[str, Any]] = [{"role": "user", "content": "6*7?"}]
SCENARIO_TIMEOUT_SEC = 60.0
SETTLE_TIMEOUT_SEC = 10.0
WAKE_TIMEOUT_SEC = 5.0


# -- recording --------------------------------------------------------------------------------


class Wire:
    """An httpx client factory whose hooks log every request and response (never secrets)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.log: list[dict[str, Any]] = []
        self._tokens: dict[str, str] = {}

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(event_hooks={"request": [self._sent], "response": [self._record]})

    async def _sent(self, request: httpx.Request) -> None:
        self.requests.append({"method": request.method, "path": request.url.path})

    async def _record(self, response: httpx.Response) -> None:
        await response.aread()
        request = response.request
        entry: dict[str, Any] = {
            "method": request.method,
            "path": request.url.path,
            "status_code": response.status_code,
            "retry_after": response.headers.get("retry-after"),
        }
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            if "detail" in body:
                entry["detail"] = body["detail"]
            if request.url.path.endswith("/result") and response.status_code == 200:
                entry["rollout_status"] = body.get("status")
            if request.url.path == "/rollout" and response.status_code == 202:
                token = body.get("polling_lease_token")
                if isinstance(token, str):
                    self._tokens[str(body.get("rollout_id"))] = token
                entry["admission"] = {
                    "rollout_id": body.get("rollout_id"),
                    "keys": sorted(body),
                    "status": body.get("status"),
                    "token_length": len(token) if isinstance(token, str) else None,
                    "result_wait_timeout_sec": body.get("result_wait_timeout_sec"),
                    "polling_lease_timeout_sec": body.get("polling_lease_timeout_sec"),
                }
        self.log.append(entry)

    def token(self, rollout_id: str) -> str:
        return self._tokens[rollout_id]

    def posts(self) -> list[dict[str, Any]]:
        return [e for e in self.log if e["method"] == "POST" and e["path"] == "/rollout"]

    def observed(self, rollout_id: str) -> list[str]:
        """Rollout statuses in the order the client's result polls returned them."""
        path = f"/rollout/{rollout_id}/result"
        return [
            e["rollout_status"] for e in self.log if e["path"] == path and "rollout_status" in e
        ]

    def sent_for(self, rollout_id: str) -> int:
        """Requests the client sent that concern `rollout_id`'s result."""
        path = f"/rollout/{rollout_id}/result"
        return sum(1 for r in self.requests if r["path"] == path)

    def admission(self, rollout_id: str) -> dict[str, Any] | None:
        for entry in self.posts():
            if entry.get("admission", {}).get("rollout_id") == rollout_id:
                return dict(entry["admission"])
        return None


def describe_result(result: RolloutResultResponse) -> dict[str, Any]:
    body = result.model_dump(mode="json")
    sample = body.get("sample")
    if isinstance(sample, dict):
        # A persistence-only copy the client model re-creates; it was never on the wire.
        body["client_trajectory_messages_present"] = sample.pop("trajectory_messages") is not None
    body["reward"] = result.sample.reward if result.sample is not None else None
    body["type"] = type(result).__name__
    return body


def describe_handle(handle: RolloutHandle) -> dict[str, Any]:
    """Our additions to the handle: observed transitions, skip reasons, counters."""
    return {
        "status": str(handle.status),
        "transitions": [str(t.status) for t in handle.transitions],
        "transition_times_ordered": all(
            a.at <= b.at for a, b in itertools.pairwise(handle.transitions)
        ),
        "skipped_phases": {str(k): v for k, v in handle.skipped_phases().items()},
        "grade": handle.grade,
        "polls": handle.polls,
        "poll_retries": handle.poll_retries,
        "last_poll_error": handle.last_poll_error,
        "done": handle.done(),
        "polling_finished": handle.polling_finished,
        "latest_status": (
            str(handle.latest_result.status) if handle.latest_result is not None else None
        ),
    }


def describe_error(exc: BaseException) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "mro": [cls.__name__ for cls in type(exc).__mro__],
        "message": str(exc),
        "status_code": getattr(exc, "status_code", None),
    }


async def outcome(awaitable: Awaitable[Any]) -> dict[str, Any]:
    """`{"value": ...}` or `{"error": describe_error(...)}` plus the elapsed time."""
    started = time.monotonic()
    try:
        value = await awaitable
    except Exception as exc:
        return {"error": describe_error(exc), "elapsed_sec": time.monotonic() - started}
    if isinstance(value, RolloutResultResponse):
        value = describe_result(value)
    elif hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    elif isinstance(value, RolloutHandle):
        value = {"rollout_id": value.rollout_id, "status": str(value.status)}
    return {"value": value, "elapsed_sec": time.monotonic() - started}


async def settle(awaitable: Awaitable[Any]) -> dict[str, Any]:
    """How something that should end by cancellation ended (or that it never ended)."""
    try:
        async with asyncio.timeout(WAKE_TIMEOUT_SEC):
            value = await awaitable
    except TimeoutError:
        return {"type": "hung"}
    except asyncio.CancelledError as exc:
        # Raised on behalf of the handle's cancelled task, not because this task was cancelled.
        return describe_error(exc)
    except Exception as exc:
        return describe_error(exc)
    return {"type": None, "value": str(value)}


async def wait_for_health(
    client: RolloutClient, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    async with asyncio.timeout(SETTLE_TIMEOUT_SEC):
        while True:
            health = await client.health()
            if predicate(health):
                return health
            await asyncio.sleep(0.02)


def running_count(health: dict[str, Any]) -> int:
    return int(health.get("concurrency", {}).get("running", -1))


def rollout_args(rollout_id: str, **metadata: Any) -> dict[str, Any]:
    return {
        "initial_messages": PROMPT,
        "chat_completions_url": CHAT_URL,
        "rollout_id": rollout_id,
        "label": "42",
        "metadata": metadata,
    }


async def raw_result(raw: httpx.AsyncClient, rollout_id: str, token: str) -> dict[str, Any]:
    response = await raw.get(f"/rollout/{rollout_id}/result", headers={POLLING_LEASE_HEADER: token})
    return {"status_code": response.status_code, "body": response.json()}


# -- scenarios --------------------------------------------------------------------------------


async def scenario_success(url: str) -> dict[str, Any]:
    wire = Wire()
    async with wire.client() as http:
        client = RolloutClient(url=url, http_client=http)
        handle = await client.run_rollout_async(**rollout_args("ours-success", sleep=0.3))
        initial = str(handle.status)
        initial_transitions = [str(t.status) for t in handle.transitions]
        running = await handle.wait_for_running()
        result = await handle
        again = await handle.wait_for_completion()
        awaited_twice = await handle
        via_run_rollout = await outcome(
            client.run_rollout(**rollout_args("ours-success-direct", answer="42"))
        )
        wrong = await outcome(client.run_rollout(**rollout_args("ours-wrong", answer="41")))
        return {
            "initial_status": initial,
            "initial_transitions": initial_transitions,
            "wait_for_running": str(running),
            "same_result_object": again is result and awaited_twice is result,
            "latest_is_result": handle.latest_result is result,
            "handle": describe_handle(handle),
            "result": describe_result(result),
            "observed": wire.observed("ours-success"),
            "result_gets_answered": sum(
                1
                for e in wire.log
                if e["path"] == "/rollout/ours-success/result" and e["status_code"] == 200
            ),
            "admission": wire.admission("ours-success"),
            "run_rollout": via_run_rollout,
            "wrong_answer": wrong,
        }


async def scenario_no_grade(url: str) -> dict[str, Any]:
    wire = Wire()
    async with wire.client() as http:
        client = RolloutClient(url=url, http_client=http)
        handle = await client.run_rollout_async(
            **rollout_args("ours-no-grade", sleep=0.2), grade=False
        )
        grading = await handle.wait_for_grading()
        result = await handle
        return {
            "wait_for_grading": str(grading),
            "result": describe_result(result),
            "handle": describe_handle(handle),
            "observed": wire.observed("ours-no-grade"),
        }


async def scenario_failures(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        client = RolloutClient(url=url, http_client=http)

        async def run(rollout_id: str, **options: Any) -> dict[str, Any]:
            agent_timeout = options.pop("agent_timeout_sec", None)
            started = time.monotonic()
            handle = await client.run_rollout_async(
                **rollout_args(rollout_id, **options), agent_timeout_sec=agent_timeout
            )
            seen = await outcome(handle.wait_for_completion())
            # From before the admission: the server's deadline starts before the 202 arrives.
            seen["total_sec"] = time.monotonic() - started
            seen["handle"] = describe_handle(handle)
            return seen

        runs = {
            "value_error": run("ours-fail-value", message="bad value", **{"raise": "value"}),
            "runtime_error": run("ours-fail-runtime", message="it broke", **{"raise": "runtime"}),
            "user_timeout": run(
                "ours-fail-user-timeout", message="too slow", **{"raise": "timeout"}
            ),
            "deadline": run("ours-fail-deadline", sleep=5, agent_timeout_sec=0.2),
        }
        names = list(runs)
        done = await asyncio.gather(*(runs[name] for name in names))
        return dict(zip(names, done, strict=True))


async def scenario_server_cancel(url: str) -> dict[str, Any]:
    """Needs a server whose LocalBackend runs one rollout at a time (max_concurrent=1)."""
    wire = Wire()
    async with wire.client() as http:
        client = RolloutClient(url=url, http_client=http)
        running = await client.run_rollout_async(**rollout_args("ours-cancel-running", sleep=30))
        await wait_for_health(client, lambda h: running_count(h) == 1)
        waiting = await client.run_rollout_async(**rollout_args("ours-cancel-waiting", sleep=30))
        busy = await wait_for_health(client, lambda h: h.get("concurrency", {}).get("queued") == 1)
        # Not wait_for_running(): a poll that arrives when the rollout already runs is held by
        # the official server until the next status change, so health is the prompt signal.
        started = time.monotonic()
        cancel_waiting = await outcome(client.cancel_rollout("ours-cancel-waiting"))
        cancel_running = await outcome(client.cancel_rollout("ours-cancel-running"))
        running_result = await outcome(running)
        waiting_result = await outcome(waiting)
        cancelled_after_sec = time.monotonic() - started
        repeat = {
            rollout_id: (await outcome(client.cancel_rollout(rollout_id)))
            for rollout_id in ("ours-cancel-running", "ours-cancel-never-admitted")
        }
        idle = await client.wait_idle(timeout_sec=SETTLE_TIMEOUT_SEC, poll_interval_sec=0.05)
        return {
            "busy_concurrency": busy.get("concurrency"),
            "cancel_waiting": cancel_waiting,
            "cancel_running": cancel_running,
            "running_result": running_result,
            "waiting_result": waiting_result,
            "running_handle": describe_handle(running),
            "waiting_handle": describe_handle(waiting),
            "cancelled_after_sec": cancelled_after_sec,
            "running_observed": wire.observed("ours-cancel-running"),
            "waiting_observed": wire.observed("ours-cancel-waiting"),
            "repeat_cancel": repeat,
            "idle_lifecycle": idle.get("lifecycle"),
        }


async def scenario_duplicate(url: str) -> dict[str, Any]:
    wire = Wire()
    async with wire.client() as http:
        client = RolloutClient(url=url, http_client=http)
        first = await client.run_rollout_async(**rollout_args("ours-dup", sleep=0.5))
        while_active = await outcome(client.run_rollout_async(**rollout_args("ours-dup")))
        first_result = describe_result(await first)
        while_retained = await outcome(client.run_rollout_async(**rollout_args("ours-dup")))
        return {
            "while_active": while_active,
            "first_result": first_result,
            "while_retained": while_retained,
            "post_statuses": [e["status_code"] for e in wire.posts()],
            "post_details": [e.get("detail") for e in wire.posts()],
        }


async def scenario_local_cancel(url: str) -> dict[str, Any]:
    """Needs a server with short timeouts (e.g. wait 0.2 s, lease 0.6 s)."""
    wire = Wire()
    async with wire.client() as http, httpx.AsyncClient(base_url=url) as raw:
        client = RolloutClient(url=url, http_client=http)

        # 1. Cancelled before its polling task ever ran, with waiters already queued behind it:
        #    the case where the official handle leaves wait_for_* hanging.
        early = await client.run_rollout_async(**rollout_args("ours-local-early", sleep=30))
        early_waiters = [
            asyncio.create_task(early.wait_for_running()),
            asyncio.create_task(early.wait_for_grading()),
        ]
        early_cancel = early.cancel()
        early_awaited = await settle(early)
        early_woken = [await settle(waiter) for waiter in early_waiters]
        early_later_wait = await settle(early.wait_for_running())

        # 2. Cancelled while a poll is in flight, with a waiter pending.
        late = await client.run_rollout_async(**rollout_args("ours-local-late", sleep=30))
        late_reached = await late.wait_for_running()
        late_waiter = asyncio.create_task(late.wait_for_grading())
        await asyncio.sleep(0.05)
        late_waiter_pending = not late_waiter.done()
        sent_before = len(wire.requests)
        late_cancel = late.cancel()
        late_awaited = await settle(late)
        late_woken = await settle(late_waiter)
        late_cancel_again = late.cancel()
        # Several result-wait periods: an uncancelled poller would have sent more GETs by now.
        await asyncio.sleep(0.6)
        sent_after_cancel = wire.requests[sent_before:]

        # Nobody told the server: both rollouts end by lease expiry, not by cancellation.
        lease_sec = float((wire.admission("ours-local-late") or {})["polling_lease_timeout_sec"])
        await asyncio.sleep(lease_sec * 2)
        early_server = await raw_result(raw, "ours-local-early", wire.token("ours-local-early"))
        late_server = await raw_result(raw, "ours-local-late", wire.token("ours-local-late"))
        return {
            "early": {
                "cancel_returned": early_cancel,
                "awaited": early_awaited,
                "waiters": early_woken,
                "wait_after_cancel": early_later_wait,
                "handle": describe_handle(early),
                "result_requests_sent": wire.sent_for("ours-local-early"),
                "server_result": early_server,
            },
            "late": {
                "reached": str(late_reached),
                "waiter_pending_before_cancel": late_waiter_pending,
                "cancel_returned": late_cancel,
                "cancel_again_returned": late_cancel_again,
                "awaited": late_awaited,
                "waiter": late_woken,
                "handle": describe_handle(late),
                "requests_after_cancel": sent_after_cancel,
                "server_result": late_server,
            },
            "cancel_posts": sum(1 for r in wire.requests if r["path"] == "/rollout/cancel"),
        }


async def scenario_lease_expiry(url: str) -> dict[str, Any]:
    """Needs a server with short timeouts (e.g. wait 0.2 s, lease 0.6 s)."""
    wire = Wire()
    async with wire.client() as http, httpx.AsyncClient(base_url=url) as raw:
        client = RolloutClient(url=url, http_client=http)

        async def renewed() -> dict[str, Any]:
            # Outlives several lease periods; the client's polls must keep it alive.
            handle = await client.run_rollout_async(**rollout_args("ours-lease-renewed", sleep=1.5))
            result = await handle
            return {
                "result": describe_result(result),
                "polls": len(wire.observed("ours-lease-renewed")),
                "handle": describe_handle(handle),
            }

        renewed_task = asyncio.create_task(renewed())
        handle = await client.run_rollout_async(**rollout_args("ours-lease", sleep=30))
        admission = wire.admission("ours-lease")
        reached = await handle.wait_for_running()
        cancel_returned = handle.cancel()
        awaited = await settle(handle)
        lease_sec = float((admission or {}).get("polling_lease_timeout_sec") or 0.6)
        await asyncio.sleep(lease_sec * 3)

        token = wire.token("ours-lease")
        expired = await raw_result(raw, "ours-lease", token)
        expired_again = await raw_result(raw, "ours-lease", token)
        wrong_token = await raw_result(raw, "ours-lease", "not-the-lease")
        readmit = await outcome(client.run_rollout_async(**rollout_args("ours-lease")))
        idle = await client.wait_idle(timeout_sec=SETTLE_TIMEOUT_SEC, poll_interval_sec=0.05)
        return {
            "admission": admission,
            "wait_for_running": str(reached),
            "handle_cancel_returned": cancel_returned,
            "awaited_after_cancel": awaited,
            "handle": describe_handle(handle),
            "expired": expired,
            "expired_again": expired_again,
            "wrong_token": wrong_token,
            "readmit": readmit,
            "idle_lifecycle": idle.get("lifecycle"),
            "renewed": await renewed_task,
        }


async def scenario_backpressure(url: str) -> dict[str, Any]:
    """Needs a backend that has no capacity while one rollout is in flight (it then says 429)."""
    first_wire, int_wire, float_wire, patient_wire = Wire(), Wire(), Wire(), Wire()
    async with (
        first_wire.client() as first_http,
        int_wire.client() as int_http,
        float_wire.client() as float_http,
        patient_wire.client() as patient_http,
        httpx.AsyncClient(base_url=url) as raw,
    ):
        client = RolloutClient(url=url, http_client=first_http)
        first = await client.run_rollout_async(**rollout_args("ours-bp-first", sleep=2.0))
        busy = await wait_for_health(client, lambda h: h.get("in_flight") == 1)
        raw_full = await raw.post(
            "/rollout",
            json={
                "rollout_id": "ours-bp-raw",
                "initial_messages": PROMPT,
                "chat_completions_url": CHAT_URL,
            },
        )
        # The deadline is printed as given: an int stays "1", a float "1.0".
        impatient_int = RolloutClient(url=url, http_client=int_http, admission_timeout_sec=1)
        impatient_float = RolloutClient(url=url, http_client=float_http, admission_timeout_sec=1.0)
        patient = RolloutClient(url=url, http_client=patient_http, admission_timeout_sec=20)

        async def patient_run() -> dict[str, Any]:
            started = time.monotonic()
            handle = await patient.run_rollout_async(**rollout_args("ours-bp-patient"))
            admitted_after = time.monotonic() - started
            return {"admitted_after_sec": admitted_after, "result": describe_result(await handle)}

        int_outcome, float_outcome, patient_outcome = await asyncio.gather(
            outcome(impatient_int.run_rollout_async(**rollout_args("ours-bp-impatient"))),
            outcome(impatient_float.run_rollout_async(**rollout_args("ours-bp-impatient-f"))),
            patient_run(),
        )
        never_admitted = await raw_result(raw, "ours-bp-impatient", "x")
        return {
            "busy_in_flight": busy.get("in_flight"),
            "raw_full": {
                "status_code": raw_full.status_code,
                "retry_after": raw_full.headers.get("retry-after"),
                "body": raw_full.json(),
            },
            "impatient_int": int_outcome,
            "impatient_int_posts": [e["status_code"] for e in int_wire.posts()],
            "impatient_float": float_outcome,
            "impatient_float_posts": [e["status_code"] for e in float_wire.posts()],
            "patient": patient_outcome,
            "patient_posts": [
                {"status_code": e["status_code"], "retry_after": e["retry_after"]}
                for e in patient_wire.posts()
            ],
            "first_result": describe_result(await first),
            "impatient_never_admitted": never_admitted,
        }


async def scenario_health(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        client = RolloutClient(url=url, http_client=http)
        before = await client.health()
        handle = await client.run_rollout_async(**rollout_args("ours-health", sleep=1.0))
        busy = await wait_for_health(client, lambda h: running_count(h) == 1)
        idle = await client.wait_idle(timeout_sec=SETTLE_TIMEOUT_SEC, poll_interval_sec=0.05)
        result = describe_result(await handle)
        same_process = await outcome(
            client.wait_idle(timeout_sec=5, poll_interval_sec=0.05, process_id=before["process_id"])
        )
        restarted = await outcome(
            client.wait_idle(timeout_sec=5, poll_interval_sec=0.05, process_id="another-process")
        )
        bad_interval = await outcome(client.wait_idle(timeout_sec=5, poll_interval_sec=0))
        return {
            "before": before,
            "busy": busy,
            "idle": idle,
            "result": result,
            "same_process": same_process,
            "restarted": restarted,
            "bad_interval": bad_interval,
        }


async def scenario_auth(url: str) -> dict[str, Any]:
    """Needs a server built with api_key = $OSMOSIS_CONFORMANCE_API_KEY."""
    key = os.environ[API_KEY_ENV]
    async with (
        httpx.AsyncClient() as good_http,
        httpx.AsyncClient() as bad_http,
        RolloutClient(url=url) as anonymous,
    ):
        good = RolloutClient(url=url, http_client=good_http, api_key=key)
        bad = RolloutClient(url=url, http_client=bad_http, api_key=WRONG_API_KEY)
        good_handle = await good.run_rollout_async(**rollout_args("ours-auth", sleep=0.2))
        return {
            "good_health": await outcome(good.health()),
            "good_result": await outcome(good_handle.wait_for_completion()),
            "good_cancel": await outcome(good.cancel_rollout("ours-auth")),
            "good_idle": await outcome(good.wait_idle(timeout_sec=5, poll_interval_sec=0.05)),
            "bad_health": await outcome(bad.health()),
            "bad_admission": await outcome(bad.run_rollout_async(**rollout_args("ours-x"))),
            "bad_cancel": await outcome(bad.cancel_rollout("ours-auth")),
            "bad_wait_idle": await outcome(bad.wait_idle(timeout_sec=5)),
            "anonymous_health": await outcome(anonymous.health()),
        }


SCENARIOS: dict[str, Callable[[str], Awaitable[dict[str, Any]]]] = {
    "success": scenario_success,
    "no_grade": scenario_no_grade,
    "failures": scenario_failures,
    "server_cancel": scenario_server_cancel,
    "duplicate": scenario_duplicate,
    "local_cancel": scenario_local_cancel,
    "lease_expiry": scenario_lease_expiry,
    "backpressure": scenario_backpressure,
    "health": scenario_health,
    "auth": scenario_auth,
}


async def run_one(url: str, name: str) -> None:
    started = time.monotonic()
    try:
        async with asyncio.timeout(SCENARIO_TIMEOUT_SEC):
            observed: dict[str, Any] = await SCENARIOS[name](url)
    except Exception as exc:
        observed = {
            "driver_error": describe_error(exc),
            "traceback": traceback.format_exc(),
        }
    observed["scenario_elapsed_sec"] = time.monotonic() - started
    observed["python"] = platform.python_version()
    observed["core_module"] = core.__file__
    print(json.dumps({"scenario": name, **observed}, sort_keys=True), flush=True)


async def main(argv: list[str]) -> int:
    if not argv or len(argv) % 2:
        print(f"usage: {sys.argv[0]} URL SCENARIO [URL SCENARIO ...]", file=sys.stderr)
        return 2
    pairs = list(zip(argv[::2], argv[1::2], strict=True))
    unknown = sorted({name for _, name in pairs} - set(SCENARIOS))
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    await asyncio.gather(*(run_one(url, name) for url, name in pairs))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
