"""A model gateway as a process of its own, for tests that measure what a request makes the
gateway's process hold: `python -m tests.eval.gateway.gateway_process` prints the route's URL
for rollout `r1` on one line and serves until its stdin closes. Its upstream is a closed port:
nothing it is sent should ever reach one."""

from __future__ import annotations

import asyncio
import sys

from core.eval.gateway.model_gateway import ModelGateway
from core.eval.gateway.upstreams import OpenAICompatibleUpstream
from core.serving.loopback import run
from tests.eval.gateway.helpers import closed_port


async def main() -> None:
    upstream = OpenAICompatibleUpstream(
        f"http://127.0.0.1:{closed_port()}/v1", model_path="openai/gpt-5-mini"
    )
    async with upstream, ModelGateway(upstream) as gateway:
        print(gateway.chat_completions_url("r1") + "/chat/completions", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    run(main())
