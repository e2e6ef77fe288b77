"""A workspace rollout entrypoint, as a user writes one, built on server_stub's public API.

It serves the rollout protocol on 127.0.0.1:$_OSMOSIS_ROLLOUT_PORT; `create_rollout_server`
reports $_OSMOSIS_ROLLOUT_INSTANCE_ID in /health, which is how the eval knows it reached this
process. What it prints ends up in the run's logs.txt, which the tests read; with
$LAUNCH_RECORD set it also writes there how it was started.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from server_stub import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    ConcurrencyConfig,
    Grader,
    GraderContext,
    LocalBackend,
    create_rollout_server,
    get_rollout_context,
)


class AskTheModel(AgentWorkflow[AgentWorkflowConfig]):
    """One chat call to the endpoint the eval handed this rollout."""

    async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> AgentWorkflowOutput:
        rollout = get_rollout_context()
        assert rollout is not None
        # A row may ask to take its time, so that a test finds it in flight.
        await asyncio.sleep(float((ctx.metadata or {}).get("sleep", 0)))
        headers = {"Authorization": f"Bearer {rollout.api_key}"} if rollout.api_key else {}
        async with httpx.AsyncClient() as http:
            response = await http.post(
                rollout.chat_completions_url.rstrip("/") + "/chat/completions",
                json={"model": "workspace", "messages": ctx.prompt},
                headers=headers,
            )
        response.raise_for_status()
        answer: Any = response.json()["choices"][0]["message"]["content"]
        print(f"workspace rollout {rollout.rollout_id} answered {answer}", flush=True)
        if ctx.artifacts_dir is not None:  # <_OSMOSIS_ROLLOUT_ARTIFACT_ROOT>/<id>/artifacts/
            (ctx.artifacts_dir / "answer.txt").write_text(str(answer))
        return AgentWorkflowOutput(messages=[*ctx.prompt, {"role": "assistant", "content": answer}])


class ExactAnswer(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        answer = str(ctx.sample.messages[-1]["content"]).strip()
        ctx.set_reward(1.0 if answer == (ctx.label or "").strip() else 0.0)


def record_launch(path: Path) -> None:
    """What the launcher gave this process, and the command lines of the `uv run` above it and
    of what started that."""
    parent = Path(f"/proc/{os.getppid()}/cmdline")
    parent_ppid = int(Path(f"/proc/{os.getppid()}/stat").read_text().rpartition(")")[2].split()[1])
    grandparent = Path(f"/proc/{parent_ppid}/cmdline")
    record = {
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "executable": sys.executable,
        "env": dict(os.environ),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "pgid": os.getpgid(0),
        "parent_argv": parent.read_text().split("\0")[:-1] if parent.exists() else None,
        "parent_ppid": parent_ppid,
        "grandparent_argv": grandparent.read_text().split("\0")[:-1],
    }
    path.write_text(json.dumps(record))


def main() -> None:
    print(f"workspace server pid {os.getpid()}: {os.environ['WORKSPACE_GREETING']}", flush=True)
    if "LAUNCH_RECORD" in os.environ:
        record_launch(Path(os.environ["LAUNCH_RECORD"]))
    backend = LocalBackend(
        workflow=AskTheModel,
        grader=ExactAnswer,
        workflow_config=AgentWorkflowConfig(
            name="multiply", concurrency=ConcurrencyConfig(max_concurrent=4)
        ),
    )
    app = create_rollout_server(backend=backend)
    port = int(os.environ["_OSMOSIS_ROLLOUT_PORT"])
    # uvicorn shuts down gracefully on SIGTERM, then raises it again for the handler it found.
    signal.signal(signal.SIGTERM, say_stopped)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def say_stopped(signum: int, _frame: object) -> None:
    """Last words after a graceful stop, for the tests (SIGKILL leaves none)."""
    print(f"workspace server pid {os.getpid()} stopped by {signal.Signals(signum).name}")
    raise SystemExit(0)


if __name__ == "__main__":
    main()
