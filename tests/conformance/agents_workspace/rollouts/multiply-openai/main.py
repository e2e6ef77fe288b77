"""The `multiply-openai` rollout: an OpenAI Agents SDK agent answers, a grader checks the label.

Written in the style of the official workspace templates, on the official osmosis-ai 0.3.8
(run by the conformance venv's interpreter, or by `uv run` in this folder's own environment):

- the workflow config carries the integration's placeholder model, `OsmosisRolloutModel`;
  `OsmosisAgent`, built inside `run`, swaps it for a LiteLLM model bound to the rollout's
  `chat_completions_url` and `llm_api_key` (the eval's gateway and its per-run bearer);
- that model always streams: a plain `Runner.run` gathers the `stream: true` answer;
- one `OsmosisMemorySession` per rollout is the sample the grader reads, so `run` returns
  nothing.

The server listens on 127.0.0.1:$_OSMOSIS_ROLLOUT_PORT, the variable the eval's launcher sets
(a test starting it by hand sets it too).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import uvicorn
from agents import ModelSettings, Runner, TResponseInputItem
from agents.models.interface import Model
from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.integrations.agents.openai_agents import (
    OsmosisAgent,
    OsmosisMemorySession,
    OsmosisRolloutModel,
)
from osmosis_ai.rollout.server import create_rollout_server
from osmosis_ai.rollout.types import AgentWorkflowConfig, GraderConfig

# One answer is all a product takes; the bound only stops a model that keeps talking.
MAX_TURNS = 3
INSTRUCTIONS = "Multiply the two numbers you are given. Reply with the product alone."


class MultiplyAgentConfig(AgentWorkflowConfig):
    name: str = "multiply-openai"
    description: str | None = "an OpenAI Agents agent multiplies two numbers"
    model: Model
    model_settings: ModelSettings


class MultiplyAgentWorkflow(AgentWorkflow[MultiplyAgentConfig]):
    async def run(self, ctx: AgentWorkflowContext[MultiplyAgentConfig]) -> None:
        config = ctx.config
        if config is None:
            raise ValueError("the multiply workflow needs its MultiplyAgentConfig")
        agent = OsmosisAgent(
            name="multiplier",
            instructions=INSTRUCTIONS,
            model=config.model,
            model_settings=config.model_settings,
        )
        # Made here, inside the rollout, so that it registers as this rollout's sample.
        session = OsmosisMemorySession()
        # The prompt's chat messages, as the SDK's easy input items ({"role", "content"}).
        prompt: list[TResponseInputItem] = [
            {"role": message["role"], "content": message["content"]} for message in ctx.prompt
        ]
        await Runner.run(agent, prompt, session=session, max_turns=MAX_TURNS)


def final_answer(items: list[Any]) -> str:
    """The text of the last assistant message among the session's items ('' when none).

    The session keeps the SDK's own item shape: an assistant message's `content` is a list of
    parts, its text in the `output_text` ones (a plain string is accepted as well).
    """
    for item in reversed(items):
        if not isinstance(item, Mapping) or item.get("role") != "assistant":
            continue
        content = item.get("content")
        if isinstance(content, str):
            return content.strip()
        if isinstance(content, list):
            texts = [
                str(part.get("text", ""))
                for part in content
                if isinstance(part, Mapping) and part.get("type") == "output_text"
            ]
            return "".join(texts).strip()
    return ""


class ProductMatchesLabel(Grader):
    """Reward 1.0 when the agent's final answer is the label, else 0.0."""

    async def grade(self, ctx: GraderContext) -> None:
        if ctx.sample is None:
            raise ValueError("the rollout left no sample to grade")
        answer = final_answer(list(ctx.sample.messages))
        ctx.set_reward(1.0 if answer and answer == (ctx.label or "").strip() else 0.0)


def build_backend() -> LocalBackend:
    config = MultiplyAgentConfig(
        model=OsmosisRolloutModel(),
        # Usage in the stream too, so the agent's own run counts the tokens it spent.
        model_settings=ModelSettings(temperature=0.0, max_tokens=64, include_usage=True),
    )
    return LocalBackend(
        workflow=MultiplyAgentWorkflow,
        workflow_config=config,
        grader=ProductMatchesLabel,
        grader_config=GraderConfig(name="product-matches-label"),
    )


def main() -> None:
    app = create_rollout_server(backend=build_backend())
    port = int(os.environ["_OSMOSIS_ROLLOUT_PORT"])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
