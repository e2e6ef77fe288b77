"""Faults inside rollouts: the chat endpoint down or slow, graders that raise or hang (issue 7
§1). Each rollout fails with the category PROTOCOL.md §3.1 gives, and the eval goes on.

tests/server/test_backend.py proves the categories on LocalBackend alone; these run whole
evals, so they also prove that one rollout's failure never stops the others.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from core.eval import EvalSession
from core.eval.gateway.errors import PreflightError
from core.eval.servers.launcher import free_port
from server_stub import Grader, GraderContext
from tests.eval.runs.files import multiply_rows, read_jsonl
from tests.polling import eventually
from tests.reliability.in_process import chat_endpoint, demo_app, rollout_server, run_session
from tests.reliability.proxy import proxy_to
from tests.server.plugins import Echo


def outcomes(folder: Path) -> Counter[tuple[str, str | None]]:
    return Counter((e["status"], e.get("error_type")) for e in read_jsonl(folder / "events.jsonl"))


async def test_a_model_down_from_the_start_stops_the_run_before_any_rollout(
    tmp_path: Path,
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    app = demo_app()
    async with rollout_server(app) as url:
        with pytest.raises(PreflightError) as refused:
            await run_session(tmp_path, multiply_rows(6), servers=(url,), chat_url=nobody)
    assert f"cannot reach the model at {nobody}/chat/completions" in str(refused.value)
    assert not app.state.rollout_futures, "no rollout was sent"
    assert read_jsonl(tmp_path / "out" / "run" / "events.jsonl") == []


async def test_the_model_going_down_mid_run_fails_every_rollout_as_agent_error(
    tmp_path: Path,
) -> None:
    async with (
        chat_endpoint() as chat_url,
        proxy_to(chat_url.removesuffix("/v1")) as proxy,
        rollout_server(demo_app()) as url,
    ):
        cutting: list[asyncio.Task[None]] = []

        def cut_the_model_off(session: EvalSession) -> None:
            # Once the preflight has passed (the gateway is up) and before any rollout can
            # call the model: the run has its servers to reach and a rollout to admit first,
            # several round trips on this loop. (Waiting for a rollout on the board let a
            # fast one finish its call first on a busy machine.)
            async def cut() -> None:
                await eventually(
                    lambda: session.gateway is not None, "the model's preflight", interval=0.001
                )
                proxy.mode = "drop"
                proxy.cut()

            cutting.append(asyncio.ensure_future(cut()))

        run = await run_session(
            tmp_path,
            multiply_rows(6),
            servers=(url,),
            chat_url=f"{proxy.url}/v1",
            before_run=cut_the_model_off,
        )
        await cutting[0]
    assert run.summary.status == "complete"  # every item finished, if badly
    assert outcomes(run.folder) == {("failed", "agent_error"): 6}
    assert run.summary.problem is None
    messages = [r.latest_result.err_message for r in run.session.board if r.latest_result]
    assert len(messages) == 6
    assert all("HTTP 502: cannot reach the model at" in (m or "") for m in messages), messages


async def test_a_slow_chat_endpoint_times_out_the_slow_rows_only(tmp_path: Path) -> None:
    rows = [*multiply_rows(4), *multiply_rows(3, metadata={"stub": "slow:5"})]
    async with rollout_server(demo_app()) as url:
        run = await run_session(
            tmp_path, rows, servers=(url,), chat_url="stub", agent_timeout_sec=0.5
        )
    assert run.summary.status == "complete"
    assert outcomes(run.folder) == {("success", None): 4, ("failed", "timeout"): 3}
    timed_out = [
        r.latest_result.err_message
        for r in run.session.board
        if r.latest_result and r.latest_result.err_category
    ]
    assert timed_out == ["workflow exceeded its 0.5s deadline"] * 3


async def test_an_endpoint_slower_than_every_deadline_still_lets_the_run_finish(
    tmp_path: Path,
) -> None:
    async with rollout_server(demo_app()) as url:
        run = await asyncio.wait_for(
            run_session(
                tmp_path,
                multiply_rows(5, metadata={"stub": "slow:30"}),
                servers=(url,),
                chat_url="stub",
                agent_timeout_sec=0.3,
                grader_timeout_sec=0.3,
            ),
            20,
        )
    assert outcomes(run.folder) == {("failed", "timeout"): 5}
    assert run.summary.status == "complete"


class FlakyGrader(Grader):
    """Does what the row's metadata["grader"] says: ok, value, type, runtime, hang."""

    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        mode = (ctx.metadata or {}).get("grader", "ok")
        if mode == "value":
            raise ValueError("the label is not a number")
        if mode == "type":
            raise TypeError("bad comparison")
        if mode == "runtime":
            raise RuntimeError("judge model offline")
        if mode == "hang":
            await asyncio.sleep(3600)
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)


def grader_rows(*modes: str) -> list[dict[str, Any]]:
    return [
        {"user_prompt": "What is 6 * 7?", "ground_truth": "42", "metadata": {"grader": mode}}
        for mode in modes
    ]


async def test_graders_that_raise_or_hang_fail_with_their_category_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    modes = ("ok", "value", "hang", "type", "runtime", "ok", "hang", "ok")
    app = demo_app(workflow=Echo, grader=FlakyGrader, max_concurrent=4)
    async with rollout_server(app) as url:
        run = await asyncio.wait_for(
            run_session(
                tmp_path,
                grader_rows(*modes),
                servers=(url,),
                chat_url="stub",
                agent_timeout_sec=5,
                grader_timeout_sec=0.3,
                max_in_flight=4,
            ),
            20,
        )
    assert run.summary.status == "complete"
    by_row = {e["row_index"]: e for e in read_jsonl(run.folder / "events.jsonl")}
    expected = {
        "ok": ("success", None),
        "value": ("failed", "validation_error"),
        "type": ("failed", "validation_error"),
        "runtime": ("failed", "agent_error"),
        "hang": ("failed", "timeout"),
    }
    assert {row: (e["status"], e.get("error_type")) for row, e in by_row.items()} == {
        row: expected[mode] for row, mode in enumerate(modes)
    }
    hung = [
        r.latest_result.err_message
        for r in run.session.board
        if r.latest_result and r.latest_result.err_category == "timeout"
    ]
    assert hung == ["grader exceeded its 0.3s deadline"] * 2
    # A failed grade keeps the workflow's sample (reward masked), so the messages are there.
    failed = [r for r in run.session.board if r.status == "failure"]
    samples = [r.latest_result.sample if r.latest_result else None for r in failed]
    assert all(samples)
    assert all(sample.reward is None for sample in samples if sample)
