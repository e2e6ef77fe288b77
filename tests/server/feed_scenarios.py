"""Rollout scenarios whose ownership events the tests check, played over raw HTTP so that the
same moves run against our server and the official one (tests/conformance).

Each request carries a key, a prompt, a label and metadata that must never reach an event, and
the run tags (`metadata.osmosis_observability`) that must.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from server_stub import AgentWorkflowConfig, ConcurrencyConfig, LocalBackend, create_rollout_server
from tests.server.plugins import Echo, ExactMatch
from tests.server.rawhttp import Wire

RUN_TAGS = {"run_id": "run-7", "run_name": "nightly eval"}
SECRET_KEY = "sk-feeds-test-secret-0123456789"
PROMPT = "a private prompt: what is 6 * 7?"
PRIVATE = "private-metadata-value"
ERROR_TEXT = "a private error text"
# What no exported byte may contain.
NEVER_EXPORTED = (SECRET_KEY, PROMPT, PRIVATE, ERROR_TEXT, "127.0.0.1:9")

# The statuses each scenario's rollout gets from our server, in order.
EXPECTED = {
    "success": ["queued", "running", "grading", "success"],
    "no_grade": ["queued", "running", "success"],
    "failure": ["queued", "running", "failure"],
    "cancel_running": ["queued", "running", "cancelled"],
    # One slot, taken by "slot_holder": this one is cancelled while it waits for the slot.
    "cancel_queued": ["queued", "cancelled"],
    "slot_holder": ["queued", "running", "cancelled"],
    "lease_expiry": ["queued", "running", "failure"],
}
PLAIN = ("success", "no_grade", "failure", "cancel_running")
ONE_SLOT = ("cancel_queued", "slot_holder")
SHORT_LEASE = ("lease_expiry",)
#: Server options of the plain and one-slot servers: a long-poll returns after a second at most
#: (a poll for an unchanged status waits that long), and with it `until_status`.
QUICK_POLL_OPTIONS = {"result_wait_timeout_sec": 1.0}
#: Server options of the short-lease server: a lease that lapses 0.6 s after the last poll.
SHORT_LEASE_OPTIONS = {"result_wait_timeout_sec": 0.2, "polling_lease_timeout_sec": 0.6}


def our_app(
    otlp_endpoint: str | None,
    *,
    slots: int | None = None,
    timing: Mapping[str, Any] = QUICK_POLL_OPTIONS,
) -> Any:
    """Our server for a group of scenarios: `slots=1` for `ONE_SLOT`, `timing` for the lease."""
    config = (
        AgentWorkflowConfig(name="one slot", concurrency=ConcurrencyConfig(max_concurrent=slots))
        if slots is not None
        else None
    )
    backend = LocalBackend(workflow=Echo, grader=ExactMatch, workflow_config=config)
    return create_rollout_server(
        backend=backend, configure_logging=False, otlp_endpoint=otlp_endpoint, **timing
    )


async def admit(wire: Wire, rollout_id: str, **options: Any) -> None:
    metadata = {"osmosis_observability": RUN_TAGS, "private": PRIVATE, **options.pop("meta", {})}
    response = await wire.admit(
        rollout_id,
        initial_messages=[{"role": "user", "content": PROMPT}],
        llm_api_key=SECRET_KEY,
        metadata=metadata,
        **options,
    )
    assert response.status_code == 202, response.text


async def until_status(wire: Wire, rollout_id: str, wanted: str) -> None:
    """Poll (each poll is a long-poll that returns on a change) until the status is `wanted`."""
    for _ in range(200):
        response = await wire.poll(rollout_id)
        assert response.status_code == 200, response.text
        if response.json()["status"] == wanted:
            return
    raise AssertionError(f"{rollout_id} never became {wanted}")


async def cancel(wire: Wire, rollout_id: str) -> None:
    response = await wire.cancel(ids=[rollout_id])
    assert response.status_code == 200, response.text


async def _played(wire: Wire, rollout_id: str, scenario: str) -> dict[str, Any]:
    if scenario == "success":
        await admit(wire, rollout_id)
    elif scenario == "no_grade":
        await admit(wire, rollout_id, grade=False)
    elif scenario == "failure":
        await admit(wire, rollout_id, meta={"raise": "runtime", "message": ERROR_TEXT})
    elif scenario == "cancel_running":
        await admit(wire, rollout_id, meta={"sleep": 60})
        await until_status(wire, rollout_id, "running")
        await cancel(wire, rollout_id)
    else:
        raise ValueError(scenario)
    _, final = await wire.until_terminal(rollout_id)
    return final


async def play_plain(wire: Wire, prefix: str = "") -> dict[str, dict[str, Any]]:
    """`PLAIN` at once on one server; the final result of each, by scenario."""
    finals = await asyncio.gather(*(_played(wire, prefix + name, name) for name in PLAIN))
    return dict(zip(PLAIN, finals, strict=True))


async def play_one_slot(wire: Wire, prefix: str = "") -> dict[str, dict[str, Any]]:
    """`ONE_SLOT` on a server that runs one rollout at a time."""
    holder, waiting = prefix + "slot_holder", prefix + "cancel_queued"
    await admit(wire, holder, meta={"sleep": 60})
    await until_status(wire, holder, "running")
    await admit(wire, waiting, meta={"sleep": 60})
    await cancel(wire, waiting)
    _, waiting_final = await wire.until_terminal(waiting)
    await cancel(wire, holder)
    _, holder_final = await wire.until_terminal(holder)
    return {"cancel_queued": waiting_final, "slot_holder": holder_final}


async def play_short_lease(wire: Wire, prefix: str = "") -> dict[str, dict[str, Any]]:
    """`SHORT_LEASE` on a server with `SHORT_LEASE_OPTIONS`: nobody polls, the lease lapses."""
    rollout_id = prefix + "lease_expiry"
    await admit(wire, rollout_id, meta={"sleep": 60})
    await asyncio.sleep(1.5)
    _, final = await wire.until_terminal(rollout_id)
    return {"lease_expiry": final}
