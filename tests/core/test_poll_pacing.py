"""How fast the client polls a server that does not hold the long poll (issue 15).

A server that answers every poll at once with the status the rollout already had would be
polled back to back; the handle spaces such polls (core/handle.py, QUICK_POLL_PAUSE_SEC).
A poll that brings a new status is followed by the next one at once: every status is seen as
soon as the server has it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from core import handle as handle_module
from core.client import RolloutClient
from core.serving.loopback import serve_in_loop

PROMPT = [{"role": "user", "content": "2*3"}]


class Impatient:
    """A rollout server that never holds a poll: each GET answers at once with what
    `status_at(poll number)` says."""

    def __init__(self, status_at: Callable[[int], str]) -> None:
        self.status_at = status_at
        self.polls: list[float] = []
        self.app = Starlette(
            routes=[
                Route("/rollout", self.admit, methods=["POST"]),
                Route("/rollout/{rollout_id}/result", self.result, methods=["GET"]),
            ]
        )

    async def admit(self, request: Request) -> Response:
        body = await request.json()
        return JSONResponse(
            {
                "rollout_id": body["rollout_id"],
                "status": "queued",
                "polling_lease_token": "t",
                "result_wait_timeout_sec": 30.0,
                "polling_lease_timeout_sec": 120.0,
            },
            status_code=202,
        )

    async def result(self, request: Request) -> Response:
        self.polls.append(time.monotonic())
        status = self.status_at(len(self.polls))
        rollout_id = request.path_params["rollout_id"]
        return JSONResponse({"rollout_id": rollout_id, "status": status})


async def test_polls_answered_at_once_with_an_unchanged_status_are_spaced() -> None:
    started = time.monotonic()
    server = Impatient(lambda _n: "running" if time.monotonic() - started < 2.0 else "success")
    async with serve_in_loop(server.app) as url, RolloutClient(url=url) as client:
        handle = await client.run_rollout_async(PROMPT, "http://chat.invalid/v1", "r1")
        result = await handle
    assert result.status == "success"
    # Back to back, two seconds are thousands of polls on loopback; spaced by a pause growing
    # from 50 ms to 500 ms, about ten. (The pause counts from when a poll started on the
    # client, so the gaps the server sees between arrivals vary with the machine's load.)
    assert 3 <= len(server.polls) <= 20, len(server.polls)
    gaps = [b - a for a, b in zip(server.polls, server.polls[1:], strict=False)]
    assert max(gaps) <= handle_module.QUICK_POLL_PAUSE_MAX_SEC + 0.5, gaps


async def test_a_poll_that_brings_a_new_status_is_followed_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A pause this long would show in the timing if a new status waited for it.
    monkeypatch.setattr(handle_module, "QUICK_POLL_PAUSE_SEC", 5.0)
    statuses = ["running", "grading", "success"]
    server = Impatient(lambda n: statuses[min(n, len(statuses)) - 1])
    async with serve_in_loop(server.app) as url, RolloutClient(url=url) as client:
        started = time.monotonic()
        handle = await client.run_rollout_async(PROMPT, "http://chat.invalid/v1", "r1")
        result = await handle
        took = time.monotonic() - started
    assert result.status == "success"
    assert [t.status.value for t in handle.transitions] == ["queued", *statuses]
    assert len(server.polls) == 3
    assert took < 2.5, took
