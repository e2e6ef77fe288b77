"""The benchmark rollout, written once and run by both servers (ours and the official one).

It makes one chat call through a single shared aiohttp session per process, and records when
it started and ended so the benchmark can measure observation latency. aiohttp rather than
httpx: through httpx's default transport that one call was about 60% of either server's CPU
per rollout (httpcore rescans its pool on every request), so the figures measured httpcore
instead of the protocol pair; creating a client per rollout would cost ~40 ms and measure
nothing useful either.
"""

from __future__ import annotations

import os
import time
from typing import Any

import aiohttp

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

_sessions: list[aiohttp.ClientSession] = []  # one per process, made on first use


def _http() -> aiohttp.ClientSession:
    if not _sessions:
        connector = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=30.0)
        _sessions.append(aiohttp.ClientSession(connector=connector, timeout=timeout))
    return _sessions[0]


class ChatOnce(AgentWorkflow):  # type: ignore[type-arg, misc, unused-ignore]
    async def run(self, ctx: Any) -> Any:
        started = time.monotonic()
        rollout = get_rollout_context()
        assert rollout is not None
        # The key matters behind the eval's gateway (bench/scale.py); the stub ignores it.
        headers = {"Authorization": f"Bearer {rollout.api_key}"} if rollout.api_key else {}
        async with _http().post(
            f"{rollout.chat_completions_url}/chat/completions",
            json={"model": "bench", "messages": ctx.prompt},
            headers=headers,
        ) as response:
            response.raise_for_status()
            answer = (await response.json())["choices"][0]["message"]
        ended = time.monotonic()
        return AgentWorkflowOutput(
            messages=[*ctx.prompt, answer],
            metrics={"started": started, "ended": ended},
        )


class AlwaysRight(Grader):  # type: ignore[misc, unused-ignore]
    async def grade(self, ctx: GraderContext) -> None:
        ctx.set_reward(1.0)
