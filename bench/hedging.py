"""Hedging (issue 28 item 1): the wall time of one run where 5 % of rollouts hang, without
hedging and with `--hedge-after 3x`, measured in the same process one after the other.

Two rollout servers on this process's loop (the demo workflow behind a script, as the
reliability tests run them), the stub model, an in-process `EvalSession` (what
`osmosis-tui eval --server A --server B` runs). Each rollout takes 0.5 to 1 s; the first attempt
of one row in twenty hangs for `--hang` seconds before it answers (a provider that stalls, then
recovers); any later attempt of it answers as the others do. Not in `make bench` (a minute or
so): `python -m bench.hedging`.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import zlib
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path

from core.eval.hedging import HedgeAfter
from server_stub import AgentWorkflowContext, AgentWorkflowOutput
from server_stub.demo import MultiplyWorkflow
from server_stub.workflow import AgentWorkflowConfig
from tests.eval.runs.files import multiply_rows
from tests.reliability.in_process import demo_app, rollout_server, run_session

#: One row in this many hangs on its first attempt.
HANG_EVERY = 20


def scripted(hang_sec: float, started: Counter[str]) -> type[MultiplyWorkflow]:
    class Tail(MultiplyWorkflow):
        async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> AgentWorkflowOutput:
            prompt = str(ctx.prompt[-1]["content"])
            attempt = started[prompt]
            started[prompt] += 1
            key = zlib.crc32(prompt.encode())
            await asyncio.sleep(0.5 + (key % 100) / 200)
            if key % HANG_EVERY == 0 and attempt == 0:
                await asyncio.sleep(hang_sec)
            return await super().run(ctx)

    return Tail


async def one_run(rows: int, hang_sec: float, hedge: HedgeAfter | None) -> tuple[float, str]:
    started: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as folder:
        async with AsyncExitStack() as stack:
            urls = tuple(
                [
                    await stack.enter_async_context(
                        rollout_server(demo_app(workflow=scripted(hang_sec, started)))
                    )
                    for _ in range(2)
                ]
            )
            began = time.monotonic()
            run = await run_session(
                Path(folder),
                multiply_rows(rows),
                servers=urls,
                chat_url="stub",
                max_in_flight=16,
                hedge_after=hedge,
            )
            wall = time.monotonic() - began
    assert run.summary.status == "complete", run.summary.problem
    tail = run.summary.tail or {}
    return wall, f"hedges sent {tail.get('hedges_sent', 0)}, won {tail.get('hedges_won', 0)}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--hang", type=float, default=30.0, help="seconds a hung attempt takes")
    args = parser.parse_args()
    hung = sum(
        1
        for row in multiply_rows(args.rows)
        if zlib.crc32(str(row["user_prompt"]).encode()) % HANG_EVERY == 0
    )
    print(f"{args.rows} rollouts, {hung} hang {args.hang:g} s on their first attempt")
    for label, hedge in (("without hedging", None), ("--hedge-after 3x", HedgeAfter(factor=3))):
        wall, said = await one_run(args.rows, args.hang, hedge)
        print(f"{label:>18}: {wall:6.1f} s wall ({said})")


if __name__ == "__main__":
    asyncio.run(main())
