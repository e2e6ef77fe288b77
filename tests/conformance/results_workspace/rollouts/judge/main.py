"""A rollout on the official osmosis-ai 0.3.8 SDK, for the results-folder conformance tests.

The workflow asks the run's model (through the `chat_completions_url` and key the eval gives
each rollout) the row's question; a prompt with FAIL in it fails the workflow instead. The
grader gives 1.0 when the reply holds the label, else 0.25, drops the sample when the row's
metadata says `skip`, and leaves its verdict in `artifacts/grade.json`. So one dataset yields
every kind of result an eval records: passed, graded below the threshold, failed, skipped.
"""

from __future__ import annotations

import asyncio
import json
import os

import httpx
import uvicorn
from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import (
    AgentWorkflowContext,
    GraderContext,
    SampleSource,
    get_rollout_context,
)
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.server import create_rollout_server
from osmosis_ai.rollout.types import RolloutSample

PASSED, BELOW = 1.0, 0.25


class Conversation(SampleSource):
    def __init__(self, messages: list[dict[str, str]]) -> None:
        self.messages = messages

    async def get_sample(self) -> RolloutSample:
        return RolloutSample(messages=list(self.messages))


class AskTheModel(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> None:
        rollout = get_rollout_context()
        assert rollout is not None
        messages = [dict(message) for message in ctx.prompt]
        if any("FAIL" in str(message.get("content")) for message in messages):
            raise RuntimeError("this row fails on purpose")
        headers = {"Authorization": f"Bearer {rollout.api_key}"} if rollout.api_key else {}
        async with httpx.AsyncClient(timeout=60) as http:
            response = await http.post(
                f"{rollout.chat_completions_url}/chat/completions",
                headers=headers,
                json={"model": "judge", "messages": messages},
            )
            response.raise_for_status()
        reply = response.json()["choices"][0]["message"]["content"] or ""
        rollout.set_sample_source(
            Conversation([*messages, {"role": "assistant", "content": reply}])
        )


class HoldsTheLabel(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        reply = str(ctx.sample.messages[-1].get("content", ""))
        passed = ctx.label is not None and ctx.label.strip() in reply
        if ctx.metadata and ctx.metadata.get("skip"):
            ctx.sample.remove_sample = True
        if ctx.artifacts_dir is not None:
            verdict = json.dumps({"label": ctx.label, "reply": reply, "passed": passed})
            await asyncio.to_thread((ctx.artifacts_dir / "grade.json").write_text, verdict)
        ctx.set_reward(PASSED if passed else BELOW)


def main() -> None:
    app = create_rollout_server(backend=LocalBackend(workflow=AskTheModel, grader=HoldsTheLabel))
    port = int(os.environ.get("_OSMOSIS_ROLLOUT_PORT", "8000"))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
