"""The benchmark rollout, written once and run by both servers (ours and the official one).

It makes one chat call through a single shared HTTP client per process (creating an
`httpx.AsyncClient` per rollout would cost ~40 ms of CPU and measure nothing useful), and
records when it started and ended so the benchmark can measure observation latency.
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx

# The same file for both servers: only the import line differs, as for any rollout author.
if os.environ.get("BENCH_PLUGIN_API") == "official":
    from osmosis_ai.rollout import (
        AgentWorkflow,
        AgentWorkflowOutput,
        Grader,
        GraderContext,
        get_rollout_context,
    )
else:
    from server_stub import (
        AgentWorkflow,
        AgentWorkflowOutput,
        Grader,
        GraderContext,
        get_rollout_context,
    )

_clients: list[httpx.AsyncClient] = []  # one per process, made on first use


def _http() -> httpx.AsyncClient:
    if not _clients:
        _clients.append(httpx.AsyncClient(timeout=30.0))
    return _clients[0]


class ChatOnce(AgentWorkflow):  # type: ignore[type-arg, misc, unused-ignore]
    async def run(self, ctx: Any) -> Any:
        started = time.monotonic()
        rollout = get_rollout_context()
        assert rollout is not None
        response = await _http().post(
            f"{rollout.chat_completions_url}/chat/completions",
            json={"model": "bench", "messages": ctx.prompt},
        )
        response.raise_for_status()
        answer = response.json()["choices"][0]["message"]
        ended = time.monotonic()
        return AgentWorkflowOutput(
            messages=[*ctx.prompt, answer],
            metrics={"started": started, "ended": ended},
        )


class AlwaysRight(Grader):  # type: ignore[misc, unused-ignore]
    async def grade(self, ctx: GraderContext) -> None:
        ctx.set_reward(1.0)
