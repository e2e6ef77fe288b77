"""The workspace rollout entrypoint of `multiply/`, on the official osmosis_ai 0.3.8 server.

Run by the conformance venv's interpreter (which has osmosis-ai installed); the official
`create_rollout_server` reports $_OSMOSIS_ROLLOUT_INSTANCE_ID in /health like ours does.
"""

from __future__ import annotations

import os
from typing import Any

import httpx
import uvicorn
from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext, get_rollout_context
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.server import create_rollout_server
from osmosis_ai.rollout.types import AgentWorkflowConfig, AgentWorkflowOutput


class AskTheModel(AgentWorkflow[AgentWorkflowConfig]):
    """One chat call to the endpoint the eval handed this rollout."""

    async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> AgentWorkflowOutput:
        rollout = get_rollout_context()
        assert rollout is not None
        headers = {"Authorization": f"Bearer {rollout.api_key}"} if rollout.api_key else {}
        async with httpx.AsyncClient() as http:
            response = await http.post(
                rollout.chat_completions_url.rstrip("/") + "/chat/completions",
                json={"model": "workspace", "messages": ctx.prompt},
                headers=headers,
            )
        response.raise_for_status()
        answer: Any = response.json()["choices"][0]["message"]["content"]
        print(f"official rollout {rollout.rollout_id} answered {answer}", flush=True)
        if ctx.artifacts_dir is not None:  # <_OSMOSIS_ROLLOUT_ARTIFACT_ROOT>/<id>/artifacts/
            (ctx.artifacts_dir / "answer.txt").write_text(str(answer))
        return AgentWorkflowOutput(messages=[*ctx.prompt, {"role": "assistant", "content": answer}])


class ExactAnswer(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        answer = str(ctx.sample.messages[-1]["content"]).strip()
        ctx.set_reward(1.0 if answer == (ctx.label or "").strip() else 0.0)


def main() -> None:
    print(f"official server pid {os.getpid()}: {os.environ['WORKSPACE_GREETING']}", flush=True)
    app = create_rollout_server(backend=LocalBackend(workflow=AskTheModel, grader=ExactAnswer))
    port = int(os.environ["_OSMOSIS_ROLLOUT_PORT"])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
