"""An interrupt that comes while an admission is on its way (issue 15, found by the signal
loop of test_kill_loop.py).

The rollout is admitted after the interrupt began winding the others down: the runner winds
it down too, and the rollout, cancelled, lets its handle go (the board keeps only what it
observed of a finished rollout). Reading its outcome then must not need the handle any more:
it failed an `assert` and the graceful stop ended in a traceback.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from core.eval import EvalRequest, EvalSession, prepare
from tests.eval.runs.files import multiply_rows, write_jsonl
from tests.polling import eventually
from tests.reliability.in_process import demo_app, rollout_server


class HeldAdmissions:
    """An ASGI wrapper holding every `POST /rollout` until `release` is set."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.arrived = 0
        self.release = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == "/rollout":
            self.arrived += 1
            await self.release.wait()
        await self.app(scope, receive, send)


async def test_a_rollout_admitted_during_the_interrupts_wind_down_ends_the_run_cleanly(
    tmp_path: Path,
) -> None:
    held = HeldAdmissions(demo_app())
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(2, metadata={"stub": "slow:5"}))
    async with rollout_server(held) as url:
        plan = prepare(
            EvalRequest(
                dataset_file=dataset,
                servers=(url,),
                chat_url="stub",
                output=tmp_path / "out",
                name="race",
                max_in_flight=2,
            )
        )
        session = EvalSession(plan)
        run = asyncio.ensure_future(session.run())
        await eventually(lambda: held.arrived == 2, "both admissions on their way")
        interrupting = asyncio.ensure_future(session.interrupt(cancel_in_flight=True))
        await asyncio.sleep(0.1)  # the interrupt has begun
        held.release.set()  # both admitted now, while it winds down
        await interrupting
        summary = await asyncio.wait_for(run, 60)
    assert summary.status == "interrupted"
    assert summary.results == {}, "cancelled rollouts are no results: they stay pending"
