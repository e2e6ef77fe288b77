"""Small workflows and graders the server tests plug in (written against our plug-in API)."""

from __future__ import annotations

import asyncio
from typing import Any

from server_stub import AgentWorkflow, AgentWorkflowOutput, Grader, GraderContext
from server_stub.workflow import AgentWorkflowContext


class Echo(AgentWorkflow[Any]):
    """Answers with metadata["answer"] (default "42") after metadata["sleep"] seconds."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        meta = ctx.metadata or {}
        await asyncio.sleep(float(meta.get("sleep", 0)))
        if "raise" in meta:
            raise {"value": ValueError, "runtime": RuntimeError, "timeout": TimeoutError}[
                meta["raise"]
            ](meta.get("message", "boom"))
        answer = {"role": "assistant", "content": str(meta.get("answer", "42"))}
        return AgentWorkflowOutput(messages=[*ctx.prompt, answer], metrics={"steps": 1.0})


class ExactMatch(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        meta = ctx.metadata or {}
        await asyncio.sleep(float(meta.get("grade_sleep", 0)))
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)


class RewardFromMetadata(Grader):
    """Rewards metadata["reward"]: partial credit, for pass thresholds below 1."""

    async def grade(self, ctx: GraderContext) -> None:
        ctx.set_reward(float((ctx.metadata or {})["reward"]))


class SlowCleanup(AgentWorkflow[Any]):
    """Runs until cancelled, then spends a while in its cleanup (a `finally` block)."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.shield(asyncio.sleep(0.4))
        return AgentWorkflowOutput(messages=[])
