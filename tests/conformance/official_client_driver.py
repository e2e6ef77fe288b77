"""Drive a rollout server with the OFFICIAL osmosis-ai 0.3.8 client and report what it saw.

Runs inside the Python 3.12 conformance venv (see venv.py), as a subprocess of the test:

    python official_client_driver.py URL SCENARIO [URL SCENARIO ...]

Each (URL, SCENARIO) pair runs concurrently; each prints one JSON line
`{"scenario": SCENARIO, ...observations}` on stdout when it finishes. A scenario that crashes
prints `{"scenario": SCENARIO, "driver_error": {...}}` instead, so one bug does not hide the
other observations. The server API key for the `auth` scenario comes from the environment
variable OSMOSIS_CONFORMANCE_API_KEY and is never printed; neither are lease tokens.

This module imports only the official package (plus httpx), never this project's code.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from osmosis_ai.rollout.client import RolloutClient, RolloutHandle
from osmosis_ai.rollout.types import POLLING_LEASE_HEADER, RolloutResultResponse

API_KEY_ENV = "OSMOSIS_CONFORMANCE_API_KEY"
WRONG_API_KEY = "definitely-not-the-server-key"
# Handed to the server as the rollout's chat endpoint; the test workflows never call it.
CHAT_URL = "http://127.0.0.1:9/v1"
PROMPT: list[dict[str, Any]] = [{"role": "user", "content": "6*7?"}]
SCENARIO_TIMEOUT_SEC = 60.0
SETTLE_TIMEOUT_SEC = 10.0


# -- recording --------------------------------------------------------------------------------


class Wire:
    """An httpx client factory whose response hook logs every exchange (never the secrets)."""

    def __init__(self) -> None:
        self.log: list[dict[str, Any]] = []
        self._tokens: dict[str, str] = {}

    def client(self) -> httpx.AsyncClient:
        # Same defaults as the client the official RolloutClient would create for itself.
        return httpx.AsyncClient(event_hooks={"response": [self._record]})

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

    def admission(self, rollout_id: str) -> dict[str, Any] | None:
        for entry in self.posts():
            if entry.get("admission", {}).get("rollout_id") == rollout_id:
                return dict(entry["admission"])
        return None


def describe_result(result: RolloutResultResponse) -> dict[str, Any]:
    body: dict[str, Any] = result.model_dump(mode="json")
    sample = body.get("sample")
    if isinstance(sample, dict):
        # The client re-creates this persistence-only copy; it was never on the wire.
        body["client_trajectory_messages_present"] = sample.pop("trajectory_messages") is not None
    body["reward"] = result.sample.reward if result.sample is not None else None
    body["type"] = type(result).__name__
    return body


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


async def await_cancelled_handle(handle: RolloutHandle) -> dict[str, Any]:
    """Await a handle whose polling task was cancelled locally; report what that raised."""
    try:
        await handle
    except asyncio.CancelledError as exc:
        # The handle's own task was cancelled, not this one, so swallowing is correct here.
        return describe_error(exc)
    except Exception as exc:
        return describe_error(exc)
    return {"type": None}


async def wait_for_health(
    client: RolloutClient, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    async with asyncio.timeout(SETTLE_TIMEOUT_SEC):
        while True:
            health: dict[str, Any] = await client.health()
            if predicate(health):
                return health
            await asyncio.sleep(0.02)


def rollout_args(rollout_id: str, **metadata: Any) -> dict[str, Any]:
    return {
        "initial_messages": PROMPT,
        "chat_completions_url": CHAT_URL,
        "rollout_id": rollout_id,
        "label": "42",
        "metadata": metadata,
    }


# -- scenarios --------------------------------------------------------------------------------


async def scenario_success(url: str) -> dict[str, Any]:
    wire = Wire()
    async with wire.client() as http:
        client = RolloutClient(url=url, http_client=http)
        handle = await client.run_rollout_async(**rollout_args("conf-success", sleep=0.3))
        initial = str(handle.status)
        running = await handle.wait_for_running()
        result = await handle
        again = await handle.wait_for_completion()
        via_run_rollout = await outcome(
            client.run_rollout(**rollout_args("conf-success-direct", answer="42"))
        )
        return {
            "initial_status": initial,
            "wait_for_running": str(running),
            "handle_status": str(handle.status),
            "handle_done": handle.done(),
            "same_result_object": again is result,
            "result": describe_result(result),
            "observed": wire.observed("conf-success"),
            "admission": wire.admission("conf-success"),
            "run_rollout": via_run_rollout,
        }


async def scenario_no_grade(url: str) -> dict[str, Any]:
    wire = Wire()
    async with wire.client() as http:
        client = RolloutClient(url=url, http_client=http)
        handle = await client.run_rollout_async(
            **rollout_args("conf-no-grade", sleep=0.2), grade=False
        )
        grading = await handle.wait_for_grading()
        result = await handle
        return {
            "wait_for_grading": str(grading),
            "result": describe_result(result),
            "observed": wire.observed("conf-no-grade"),
        }


async def scenario_wrong_answer(url: str) -> dict[str, Any]:
    wire = Wire()
    async with wire.client() as http:
        client = RolloutClient(url=url, http_client=http)
        result = await client.run_rollout(**rollout_args("conf-wrong", answer="41"))
        return {"result": describe_result(result), "observed": wire.observed("conf-wrong")}


async def scenario_failures(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        client = RolloutClient(url=url, http_client=http)
        # Echo raises what metadata["raise"] names; the label is set, so grading would be due.
        runs = {
            "value_error": client.run_rollout(
                **rollout_args("conf-fail-value", message="bad value", **{"raise": "value"})
            ),
            "runtime_error": client.run_rollout(
                **rollout_args("conf-fail-runtime", **{"raise": "runtime"})
            ),
            "user_timeout": client.run_rollout(
                **rollout_args("conf-fail-user-timeout", message="too slow", **{"raise": "timeout"})
            ),
            "deadline": client.run_rollout(
                **rollout_args("conf-fail-deadline", sleep=5), agent_timeout_sec=0.2
            ),
        }
        names = list(runs)
        done = await asyncio.gather(*(outcome(runs[name]) for name in names))
        return dict(zip(names, done, strict=True))


async def scenario_server_cancel(url: str) -> dict[str, Any]:
    """Needs a server whose LocalBackend runs one rollout at a time (max_concurrent=1)."""
    wire = Wire()
    async with wire.client() as http:
        client = RolloutClient(url=url, http_client=http)
        running = await client.run_rollout_async(**rollout_args("conf-cancel-running", sleep=30))
        # Not wait_for_running(): a poll that arrives when the rollout already runs is held
        # until the next status change, so the server's own counters are the prompt signal.
        await wait_for_health(client, lambda h: h.get("concurrency", {}).get("running") == 1)
        queued = await client.run_rollout_async(**rollout_args("conf-cancel-queued", sleep=30))
        busy = await wait_for_health(client, lambda h: h.get("concurrency", {}).get("queued") == 1)
        queued_status = str(queued.status)
        started = time.monotonic()
        cancel_queued = (await client.cancel_rollout("conf-cancel-queued")).model_dump(mode="json")
        cancel_running = (await client.cancel_rollout("conf-cancel-running")).model_dump(
            mode="json"
        )
        running_result = describe_result(await running)
        queued_result = describe_result(await queued)
        cancelled_after_sec = time.monotonic() - started
        repeat = {
            rollout_id: (await client.cancel_rollout(rollout_id)).model_dump(mode="json")
            for rollout_id in ("conf-cancel-running", "conf-cancel-queued", "conf-never-admitted")
        }
        idle = await client.wait_idle(timeout_sec=SETTLE_TIMEOUT_SEC, poll_interval_sec=0.05)
        return {
            "busy_concurrency": busy.get("concurrency"),
            "queued_handle_status": queued_status,
            "cancel_queued": cancel_queued,
            "cancel_running": cancel_running,
            "running_result": running_result,
            "queued_result": queued_result,
            "cancelled_after_sec": cancelled_after_sec,
            "running_observed": wire.observed("conf-cancel-running"),
            "queued_observed": wire.observed("conf-cancel-queued"),
            "repeat_cancel": repeat,
            "idle_lifecycle": idle.get("lifecycle"),
        }


async def scenario_duplicate(url: str) -> dict[str, Any]:
    wire = Wire()
    async with wire.client() as http:
        client = RolloutClient(url=url, http_client=http)
        first = await client.run_rollout_async(**rollout_args("conf-dup", sleep=0.5))
        while_active = await outcome(client.run_rollout_async(**rollout_args("conf-dup")))
        first_result = describe_result(await first)
        while_retained = await outcome(client.run_rollout_async(**rollout_args("conf-dup")))
        return {
            "while_active": while_active,
            "first_result": first_result,
            "while_retained": while_retained,
            "post_statuses": [e["status_code"] for e in wire.posts()],
            "post_details": [e.get("detail") for e in wire.posts()],
        }


async def scenario_lease_expiry(url: str) -> dict[str, Any]:
    """Needs a server with short timeouts (e.g. wait 0.2 s, lease 0.6 s)."""
    wire = Wire()
    async with wire.client() as http, httpx.AsyncClient(base_url=url) as raw:
        client = RolloutClient(url=url, http_client=http)

        async def renewed() -> dict[str, Any]:
            # Outlives several lease periods; the client's polls must keep it alive.
            result = await client.run_rollout(**rollout_args("conf-lease-renewed", sleep=1.5))
            return {
                "result": describe_result(result),
                "polls": len(wire.observed("conf-lease-renewed")),
            }

        renewed_task = asyncio.create_task(renewed())
        handle = await client.run_rollout_async(**rollout_args("conf-lease", sleep=30))
        admission = wire.admission("conf-lease")
        reached = await handle.wait_for_running()
        cancel_returned = handle.cancel()
        awaited = await await_cancelled_handle(handle)
        handle_done = handle.done()
        lease_sec = float((admission or {}).get("polling_lease_timeout_sec") or 0.6)
        await asyncio.sleep(lease_sec * 3)

        token = wire.token("conf-lease")
        path = "/rollout/conf-lease/result"
        expired = await raw.get(path, headers={POLLING_LEASE_HEADER: token})
        expired_again = await raw.get(path, headers={POLLING_LEASE_HEADER: token})
        wrong_token = await raw.get(path, headers={POLLING_LEASE_HEADER: "not-the-lease"})
        missing_header = await raw.get(path)
        unknown = await raw.get("/rollout/conf-unknown/result", headers={POLLING_LEASE_HEADER: "x"})
        readmit = await outcome(client.run_rollout_async(**rollout_args("conf-lease")))
        idle = await client.wait_idle(timeout_sec=SETTLE_TIMEOUT_SEC, poll_interval_sec=0.05)
        return {
            "admission": admission,
            "wait_for_running": str(reached),
            "handle_cancel_returned": cancel_returned,
            "awaited_after_cancel": awaited,
            "handle_done": handle_done,
            "expired": {"status_code": expired.status_code, "body": expired.json()},
            "expired_again": {
                "status_code": expired_again.status_code,
                "body": expired_again.json(),
            },
            "wrong_token": {"status_code": wrong_token.status_code, "body": wrong_token.json()},
            "missing_header": {
                "status_code": missing_header.status_code,
                "body": missing_header.json(),
            },
            "unknown": {"status_code": unknown.status_code, "body": unknown.json()},
            "readmit": readmit,
            "idle_lifecycle": idle.get("lifecycle"),
            "renewed": await renewed_task,
        }


async def scenario_backpressure(url: str) -> dict[str, Any]:
    """Needs a LocalBackend with max_concurrent=1 that answers 429 once one rollout waits."""
    first_wire, impatient_wire, patient_wire = Wire(), Wire(), Wire()
    async with (
        first_wire.client() as first_http,
        impatient_wire.client() as impatient_http,
        patient_wire.client() as patient_http,
        httpx.AsyncClient(base_url=url) as raw,
    ):
        client = RolloutClient(url=url, http_client=first_http)
        first = await client.run_rollout_async(**rollout_args("conf-bp-first", sleep=2.0))
        await wait_for_health(client, lambda h: h.get("concurrency", {}).get("running") == 1)
        waiting = await client.run_rollout_async(**rollout_args("conf-bp-waiting"))
        full = await wait_for_health(client, lambda h: h.get("concurrency", {}).get("queued") == 1)

        def body(rollout_id: str) -> dict[str, Any]:
            return {
                "rollout_id": rollout_id,
                "initial_messages": PROMPT,
                "chat_completions_url": CHAT_URL,
            }

        raw_full = await raw.post("/rollout", json=body("conf-bp-raw"))
        raw_duplicate = await raw.post("/rollout", json=body("conf-bp-first"))

        impatient = RolloutClient(url=url, http_client=impatient_http, admission_timeout_sec=1.0)
        patient = RolloutClient(url=url, http_client=patient_http, admission_timeout_sec=20.0)

        async def patient_run() -> dict[str, Any]:
            started = time.monotonic()
            handle = await patient.run_rollout_async(**rollout_args("conf-bp-patient"))
            admitted_after = time.monotonic() - started
            return {"admitted_after_sec": admitted_after, "result": describe_result(await handle)}

        impatient_outcome, patient_outcome = await asyncio.gather(
            outcome(impatient.run_rollout_async(**rollout_args("conf-bp-impatient"))),
            patient_run(),
        )
        never_admitted = await raw.get(
            "/rollout/conf-bp-impatient/result", headers={POLLING_LEASE_HEADER: "x"}
        )
        return {
            "full_concurrency": full.get("concurrency"),
            "raw_full": {
                "status_code": raw_full.status_code,
                "retry_after": raw_full.headers.get("retry-after"),
                "body": raw_full.json(),
            },
            "raw_duplicate": {
                "status_code": raw_duplicate.status_code,
                "body": raw_duplicate.json(),
            },
            "impatient": impatient_outcome,
            "impatient_posts": [e["status_code"] for e in impatient_wire.posts()],
            "patient": patient_outcome,
            "patient_posts": [
                {"status_code": e["status_code"], "retry_after": e["retry_after"]}
                for e in patient_wire.posts()
            ],
            "first_result": describe_result(await first),
            "waiting_result": describe_result(await waiting),
            "impatient_never_admitted": {
                "status_code": never_admitted.status_code,
                "body": never_admitted.json(),
            },
        }


async def scenario_health(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        client = RolloutClient(url=url, http_client=http)
        before = await client.health()
        handle = await client.run_rollout_async(**rollout_args("conf-health", sleep=1.0))
        busy = await wait_for_health(client, lambda h: h.get("concurrency", {}).get("running") == 1)
        idle = await client.wait_idle(timeout_sec=SETTLE_TIMEOUT_SEC, poll_interval_sec=0.05)
        result = describe_result(await handle)
        same_process = await outcome(
            client.wait_idle(timeout_sec=5, poll_interval_sec=0.05, process_id=before["process_id"])
        )
        restarted = await outcome(
            client.wait_idle(timeout_sec=5, poll_interval_sec=0.05, process_id="another-process")
        )
        return {
            "before": before,
            "busy": busy,
            "idle": idle,
            "result": result,
            "same_process": same_process,
            "restarted": restarted,
        }


async def scenario_auth(url: str) -> dict[str, Any]:
    """Needs a server built with api_key = $OSMOSIS_CONFORMANCE_API_KEY."""
    key = os.environ[API_KEY_ENV]
    async with httpx.AsyncClient() as good_http, httpx.AsyncClient() as bad_http:
        good = RolloutClient(url=url, http_client=good_http, api_key=key)
        bad = RolloutClient(url=url, http_client=bad_http, api_key=WRONG_API_KEY)
        anonymous = RolloutClient(url=url)
        try:
            good_handle = await good.run_rollout_async(**rollout_args("conf-auth", sleep=0.2))
            return {
                "good_health": await outcome(good.health()),
                "good_result": await outcome(good_handle.wait_for_completion()),
                "good_cancel": await outcome(good.cancel_rollout("conf-auth")),
                "good_idle": await outcome(good.wait_idle(timeout_sec=5, poll_interval_sec=0.05)),
                "bad_health": await outcome(bad.health()),
                "bad_admission": await outcome(bad.run_rollout_async(**rollout_args("conf-x"))),
                "bad_cancel": await outcome(bad.cancel_rollout("conf-auth")),
                "bad_wait_idle": await outcome(bad.wait_idle(timeout_sec=5)),
                "anonymous_health": await outcome(anonymous.health()),
            }
        finally:
            await anonymous.aclose()


SCENARIOS: dict[str, Callable[[str], Awaitable[dict[str, Any]]]] = {
    "success": scenario_success,
    "no_grade": scenario_no_grade,
    "wrong_answer": scenario_wrong_answer,
    "failures": scenario_failures,
    "server_cancel": scenario_server_cancel,
    "duplicate": scenario_duplicate,
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
