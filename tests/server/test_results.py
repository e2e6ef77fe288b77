"""Result shaping and persistence (PROTOCOL.md §3.3, §4.2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.types import RolloutErrorCategory, RolloutInitRequest, RolloutSample, RolloutStatus
from server_stub import (
    AgentWorkflow,
    AgentWorkflowOutput,
    ExecutionOutcome,
    ExecutionResult,
    Grader,
    GraderContext,
    LocalBackend,
    create_rollout_server,
)
from server_stub.results import encode_result, json_fit, save_artifacts, shape_result
from server_stub.workflow import AgentWorkflowContext
from tests.conftest import Serve
from tests.server.plugins import Echo
from tests.server.rawhttp import Wire


class Scalar:
    """Looks like a NumPy scalar: has .item()."""

    def __init__(self, value: float) -> None:
        self.value = value

    def item(self) -> float:
        return self.value


def test_json_fit_unwraps_scalars_and_drops_what_json_cannot_hold() -> None:
    fitted = json_fit(
        {
            "a": Scalar(2.5),
            "b": float("nan"),
            "c": [1, float("inf"), "x\ud800y"],
            3: "int key",
            "d": object(),
        }
    )
    assert fitted == {"a": 2.5, "c": [1, "x?y"]}


def test_reward_is_published_only_on_success_and_not_removed() -> None:
    sample = RolloutSample(messages=[{"role": "assistant", "content": "1"}], reward=1.0)
    for status, removed, expected in [
        (RolloutStatus.SUCCESS, False, 1.0),
        (RolloutStatus.SUCCESS, True, None),
        (RolloutStatus.FAILURE, False, None),
    ]:
        shaped = shape_result(
            "r",
            ExecutionResult(
                status=status, sample=sample.model_copy(update={"remove_sample": removed})
            ),
        )
        body = json.loads(encode_result(shaped))
        assert body["sample"]["reward"] == expected
        assert "trajectory_messages" not in body["sample"]
    assert sample.reward == 1.0  # shaping never mutates the backend's sample


def test_err_message_surrogates_become_question_marks() -> None:
    shaped = shape_result(
        "r",
        ExecutionResult(
            status=RolloutStatus.FAILURE,
            err_message="bad \udc80 byte",
            err_category=RolloutErrorCategory.AGENT_ERROR,
        ),
    )
    assert json.loads(encode_result(shaped))["err_message"] == "bad ? byte"


class OddOutput(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        return AgentWorkflowOutput(
            messages=[{"role": "assistant", "content": "42", "raw": object()}],
        )


class Full(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.sample.metrics = {"np": Scalar(3.0), "bad": float("nan")}
        ctx.set_reward(0.75)


async def test_unencodable_parts_are_dropped_and_the_reward_survives(serve: Serve) -> None:
    app = create_rollout_server(backend=LocalBackend(workflow=OddOutput, grader=Full))
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as http:
        wire = Wire(http)
        await wire.admit("odd")
        _, final = await wire.until_terminal("odd")
    assert final["status"] == "success"
    assert final["sample"]["reward"] == 0.75
    assert final["sample"]["messages"] == [{"role": "assistant", "content": "42"}]
    assert final["sample"]["metrics"] == {"np": 3.0}


async def test_a_crashing_backend_is_a_failure_with_its_message(serve: Serve) -> None:
    class Broken(LocalBackend):
        async def execute(self, request: Any) -> ExecutionOutcome:
            raise RuntimeError("")

    app = create_rollout_server(backend=Broken(workflow=Echo))
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as http:
        wire = Wire(http)
        await wire.admit("crash")
        _, final = await wire.until_terminal("crash")
    assert final["status"] == "failure"
    assert final["err_message"] == "Internal server error"
    assert final["err_category"] == "agent_error"


async def test_trajectory_is_saved_under_the_artifact_root(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("_OSMOSIS_ROLLOUT_ARTIFACT_ROOT", str(tmp_path))
    app = create_rollout_server(backend=LocalBackend(workflow=Echo))
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as http:
        wire = Wire(http)
        await wire.admit("saved", grade=False, extra_fields={"row_index": 3, "run_index": 0})
        await wire.until_terminal("saved")
    document = json.loads((tmp_path / "saved" / "trajectory.json").read_text())
    assert document["session_id"] == "saved"
    assert [step["source"] for step in document["steps"]] == ["user", "agent"]
    assert document["extra"]["osmosis"]["request_extra_fields"] == {"row_index": 3, "run_index": 0}
    assert not (tmp_path / "saved" / "diagnostics.json").exists()


def test_saving_is_best_effort(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    request = RolloutInitRequest(
        rollout_id="r", initial_messages=[], chat_completions_url="x", llm_api_key="sk-secret"
    )
    outcome = ExecutionOutcome(
        workflow=ExecutionResult(
            status=RolloutStatus.SUCCESS, sample=RolloutSample(messages=[]), extra_fields={"d": 1}
        )
    )
    save_artifacts(blocked, request, outcome, "pid")  # must not raise
    save_artifacts(tmp_path, request, outcome, "pid")
    assert json.loads((tmp_path / "r" / "diagnostics.json").read_text()) == {"d": 1}
    assert "sk-secret" not in (tmp_path / "r" / "trajectory.json").read_text()
