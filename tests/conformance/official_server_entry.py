"""An OFFICIAL osmosis-ai 0.3.8 rollout server, for driving with OUR client.

Runs inside the Python 3.12 conformance venv (see venv.py), as a subprocess of the test:

    python official_server_entry.py
        [--backend local|one_slot|no_capacity_while_busy|narrating|asking]
        [--result-wait-timeout-sec S] [--polling-lease-timeout-sec S] [--auth]

It builds `create_rollout_server` around an official backend whose workflow and grader are
written against the official plug-in API, serves it with uvicorn on 127.0.0.1 (a free port
chosen by the kernel) and prints `READY <port>` once uvicorn is listening. With `--auth` the
server's API key is read from the environment variable OSMOSIS_CONFORMANCE_API_KEY (never
from argv, never printed). Set `_OSMOSIS_ROLLOUT_ARTIFACT_ROOT` before starting it so the
LocalBackend keeps its artifacts out of ~/.osmosis.

This module imports only the official package (plus uvicorn, and httpx, the official
client's own dependency), never this project's code.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import socket
import sys
from typing import Any

import httpx
import uvicorn
from osmosis_ai.rollout import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    ConcurrencyConfig,
    ExecutionBackend,
    ExecutionOutcome,
    ExecutionRequest,
    Grader,
    GraderContext,
    LocalBackend,
    RolloutSample,
    SampleSource,
    get_rollout_context,
)
from osmosis_ai.rollout.server import create_rollout_server

API_KEY_ENV = "OSMOSIS_CONFORMANCE_API_KEY"
STARTUP_TIMEOUT_SEC = 30.0

_RAISES: dict[str, type[Exception]] = {
    "value": ValueError,
    "runtime": RuntimeError,
    "timeout": TimeoutError,
}


class Scripted(AgentWorkflow[Any]):
    """Does what the request's metadata says, without any chat endpoint.

    `sleep`: seconds to wait first; `raise`: one of `_RAISES` (with `message`); otherwise it
    answers `answer` (default "42") after the prompt.
    """

    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        options = ctx.metadata or {}
        await asyncio.sleep(float(options.get("sleep", 0)))
        kind = options.get("raise")
        if kind is not None:
            raise _RAISES[str(kind)](str(options.get("message", "scripted failure")))
        reply = {"role": "assistant", "content": str(options.get("answer", "42"))}
        return AgentWorkflowOutput(messages=[*ctx.prompt, reply], metrics={"steps": 1.0})


class ConversationSource(SampleSource):
    """A workflow's live conversation list, as the rollout's sample source (live previews)."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages

    async def get_sample(self) -> RolloutSample:
        return RolloutSample(messages=copy.deepcopy(self.messages))

    async def get_preview(self, max_messages: int) -> RolloutSample | None:
        if max_messages <= 0:
            return None
        return RolloutSample(
            messages=copy.deepcopy(self.messages[-max_messages:]),
            extra_fields={
                "_preview_truncated": len(self.messages) > max_messages,
                "_preview_turn": sum(m.get("role") == "assistant" for m in self.messages),
            },
        )


class Narrating(AgentWorkflow[Any]):
    """Does what tests/server/plugins.py's `Narrating` does (its `lines`, `text` and `sleep`).

    `lines` messages (default 1, assistant and user in turn, each `text`, default "line <n>"),
    then `sleep` seconds, then the answer "42"; the conversation is the sample source.
    """

    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        options = ctx.metadata or {}
        conversation = list(ctx.prompt)
        rollout = get_rollout_context()
        if rollout is None:
            raise RuntimeError("no rollout context")
        rollout.set_sample_source(ConversationSource(conversation))
        for n in range(1, int(options.get("lines", 1)) + 1):
            role = "assistant" if n % 2 else "user"
            conversation.append({"role": role, "content": options.get("text", f"line {n}")})
        await asyncio.sleep(float(options.get("sleep", 0)))
        conversation.append({"role": "assistant", "content": "42"})
        return AgentWorkflowOutput(messages=conversation)


class Asking(AgentWorkflow[Any]):
    """Asks the run's model the prompt through the rollout's chat endpoint and key (PROTOCOL.md
    §4.4), as a workflow on an integration does, then answers with its reply."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        rollout = get_rollout_context()
        if rollout is None:
            raise RuntimeError("no rollout context")
        headers = {"Authorization": f"Bearer {rollout.api_key}"} if rollout.api_key else {}
        async with httpx.AsyncClient(timeout=120.0) as http:
            response = await http.post(
                f"{rollout.chat_completions_url}/chat/completions",
                headers=headers,
                json={"model": "osmosis-rollout", "messages": list(ctx.prompt)},
            )
            response.raise_for_status()
        reply = response.json()["choices"][0]["message"]["content"] or ""
        return AgentWorkflowOutput(messages=[*ctx.prompt, {"role": "assistant", "content": reply}])


class LastMessageMatchesLabel(Grader):
    """Reward 1.0 when the last message's content equals the label, else 0.0."""

    async def grade(self, ctx: GraderContext) -> None:
        if ctx.sample is None or not ctx.sample.messages:
            raise ValueError("nothing to grade")
        content = ctx.sample.messages[-1].get("content")
        ctx.set_reward(1.0 if content == ctx.label else 0.0)


class NoCapacityWhileBusy(ExecutionBackend):
    """Admits one rollout at a time: `has_capacity()` is False while one is in flight.

    The official LocalBackend always has capacity (its excess work waits on a semaphore), so
    this is how the server is made to answer 429. Execution is delegated to a LocalBackend.
    """

    def __init__(self, inner: LocalBackend) -> None:
        self.inner = inner
        self.in_flight = 0

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        self.in_flight += 1
        try:
            return await self.inner.execute(request)
        finally:
            self.in_flight -= 1

    def has_capacity(self) -> bool:
        return self.in_flight == 0

    def health(self) -> dict[str, Any]:
        return {**self.inner.health(), "in_flight": self.in_flight}

    async def shutdown(self) -> None:
        await self.inner.shutdown()


def build_backend(kind: str) -> ExecutionBackend:
    if kind == "local":
        return LocalBackend(workflow=Scripted, grader=LastMessageMatchesLabel)
    if kind == "one_slot":
        return LocalBackend(
            workflow=Scripted,
            workflow_config=AgentWorkflowConfig(
                name="conformance-one-slot", concurrency=ConcurrencyConfig(max_concurrent=1)
            ),
            grader=LastMessageMatchesLabel,
        )
    if kind == "narrating":
        return LocalBackend(workflow=Narrating, grader=LastMessageMatchesLabel)
    if kind == "asking":
        return LocalBackend(workflow=Asking, grader=LastMessageMatchesLabel)
    if kind == "no_capacity_while_busy":
        return NoCapacityWhileBusy(LocalBackend(workflow=Scripted, grader=LastMessageMatchesLabel))
    raise SystemExit(f"unknown backend {kind!r}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--backend",
        default="local",
        choices=["local", "one_slot", "no_capacity_while_busy", "narrating", "asking"],
    )
    parser.add_argument("--result-wait-timeout-sec", type=float, default=None)
    parser.add_argument("--polling-lease-timeout-sec", type=float, default=None)
    parser.add_argument("--auth", action="store_true", help=f"api_key from ${API_KEY_ENV}")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    options: dict[str, Any] = {}
    if args.result_wait_timeout_sec is not None:
        options["result_wait_timeout_sec"] = args.result_wait_timeout_sec
    if args.polling_lease_timeout_sec is not None:
        options["polling_lease_timeout_sec"] = args.polling_lease_timeout_sec
    if args.auth:
        options["api_key"] = os.environ[API_KEY_ENV]
    app = create_rollout_server(
        backend=build_backend(args.backend), configure_logging=False, **options
    )

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    port = int(listener.getsockname()[1])
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_keep_alive=30)
    server = uvicorn.Server(config)
    # The test stops this process with SIGTERM: uvicorn's own handler runs the app's shutdown.
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    async with asyncio.timeout(STARTUP_TIMEOUT_SEC):
        while not server.started:
            if serving.done():
                await serving  # surfaces the startup error
                raise SystemExit("uvicorn stopped before it started listening")
            await asyncio.sleep(0.01)
    print(f"READY {port}", flush=True)
    await serving


def main(argv: list[str]) -> int:
    asyncio.run(serve(parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
