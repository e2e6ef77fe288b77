"""Small workflows and graders the server tests plug in (written against our plug-in API)."""

from __future__ import annotations

import asyncio
from typing import Any

from server_stub import (
    AgentWorkflow,
    AgentWorkflowOutput,
    Grader,
    GraderContext,
    get_rollout_context,
)
from server_stub.message_source import MessageSource
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


class Narrating(AgentWorkflow[Any]):
    """Shows its conversation to the server's live previews (a `MessageSource`) as it grows.

    metadata: `lines` messages at once (default 1, assistant and user in turn), each `text`
    (default "line <n>"), then `ticks` more, one every `tick` seconds, then `sleep` seconds;
    finally the answer "42".
    """

    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        meta = ctx.metadata or {}
        conversation = list(ctx.prompt)
        rollout = get_rollout_context()
        assert rollout is not None
        rollout.set_sample_source(MessageSource(conversation))

        said = 0

        def say() -> None:
            nonlocal said
            said += 1
            role = "assistant" if said % 2 else "user"
            conversation.append({"role": role, "content": meta.get("text", f"line {said}")})

        for _ in range(int(meta.get("lines", 1))):
            say()
        for _ in range(int(meta.get("ticks", 0))):
            await asyncio.sleep(float(meta.get("tick", 0.05)))
            say()
        await asyncio.sleep(float(meta.get("sleep", 0)))
        conversation.append({"role": "assistant", "content": "42"})
        return AgentWorkflowOutput(messages=conversation)


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
