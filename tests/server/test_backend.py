"""LocalBackend phase logic (PROTOCOL.md §4.3): deadlines, categories, grading rules, artifacts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from core.types import RECEIVED, RolloutErrorCategory, RolloutSample, RolloutStatus
from server_stub import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowOutput,
    ConcurrencyConfig,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    Grader,
    GraderContext,
    LocalBackend,
    RolloutContext,
    SampleSource,
    get_rollout_context,
)
from server_stub.backend import classify_error
from server_stub.local_backend import resolve_object
from server_stub.workflow import AgentWorkflowContext, RolloutProgress
from tests.server.plugins import Echo, ExactMatch


def request(**fields: Any) -> ExecutionRequest:
    base: dict[str, Any] = {
        "id": "r1",
        "prompt": [{"role": "user", "content": "6*7"}],
        "label": "42",
    }
    base.update(fields)
    return ExecutionRequest(**base)


async def run(backend: LocalBackend, req: ExecutionRequest) -> tuple[ExecutionOutcome, list[str]]:
    statuses: list[str] = []
    progress = RolloutProgress(on_status=lambda s: statuses.append(s.value))
    with RolloutContext(chat_completions_url="http://x", rollout_id=req.id, progress=progress):
        outcome = await backend.execute(req)
    return outcome, statuses


async def test_success_is_graded_and_reports_running_then_grading() -> None:
    outcome, statuses = await run(LocalBackend(workflow=Echo, grader=ExactMatch), request())
    assert statuses == ["running", "grading"]
    assert outcome.result.status == RolloutStatus.SUCCESS
    assert outcome.result.sample is not None
    assert outcome.result.sample.reward == 1.0
    assert outcome.result.sample.label == "42"
    assert outcome.result.sample.metrics == {"steps": 1.0}


async def test_grade_false_skips_grading() -> None:
    outcome, statuses = await run(
        LocalBackend(workflow=Echo, grader=ExactMatch), request(grade=False)
    )
    assert statuses == ["running"]
    assert outcome.grader is None
    assert outcome.result.status == RolloutStatus.SUCCESS
    assert outcome.result.sample is not None and outcome.result.sample.reward is None


@pytest.mark.parametrize(
    ("backend_grader", "fields", "missing"),
    [
        (None, {}, "this server has no grader"),
        (ExactMatch, {"label": None, "metadata": None}, "neither a label nor metadata"),
    ],
)
async def test_impossible_grading_is_a_named_validation_error(
    backend_grader: Any, fields: dict[str, Any], missing: str
) -> None:
    outcome, statuses = await run(
        LocalBackend(workflow=Echo, grader=backend_grader), request(**fields)
    )
    result = outcome.result
    assert "grading" not in statuses
    assert result.status == RolloutStatus.FAILURE
    assert result.err_category == RolloutErrorCategory.VALIDATION_ERROR
    assert result.err_message is not None and missing in result.err_message


async def test_empty_metadata_counts_as_given() -> None:
    outcome, _ = await run(
        LocalBackend(workflow=Echo, grader=ExactMatch), request(label=None, metadata={})
    )
    # Graded: the label is None so the answer does not match, but grading did run.
    assert outcome.result.status == RolloutStatus.SUCCESS
    assert outcome.result.sample is not None and outcome.result.sample.reward == 0.0


@pytest.mark.parametrize(
    ("kind", "category"),
    [("value", "validation_error"), ("runtime", "agent_error"), ("timeout", "timeout")],
)
async def test_workflow_exceptions_are_categorised(kind: str, category: str) -> None:
    outcome, _ = await run(
        LocalBackend(workflow=Echo, grader=ExactMatch),
        request(metadata={"raise": kind, "message": "it broke"}),
    )
    assert outcome.result.status == RolloutStatus.FAILURE
    assert outcome.result.err_category == category
    assert outcome.result.err_message == "it broke"  # a user TimeoutError keeps its message
    assert outcome.result.sample is None
    assert outcome.grader is None


async def test_workflow_deadline_message_uses_the_full_limit() -> None:
    outcome, _ = await run(
        LocalBackend(workflow=Echo),
        request(metadata={"sleep": 5}, agent_timeout_sec=0.2, grade=False),
    )
    assert outcome.result.err_category == RolloutErrorCategory.TIMEOUT
    assert outcome.result.err_message == "workflow exceeded its 0.2s deadline"


async def test_integer_limits_print_as_floats_and_queued_time_is_named() -> None:
    one_slot = AgentWorkflowConfig(name="t", concurrency=ConcurrencyConfig(max_concurrent=1))
    backend = LocalBackend(workflow=Echo, workflow_config=one_slot)
    blocker = asyncio.create_task(
        run(backend, request(id="b", metadata={"sleep": 0.3}, grade=False))
    )
    await asyncio.sleep(0.01)
    outcome, statuses = await run(
        backend, request(id="q", metadata={"sleep": 5}, agent_timeout_sec=1, grade=False)
    )
    await blocker
    assert statuses == ["running"]
    message = outcome.result.err_message or ""
    assert message.startswith("workflow exceeded its 1.0s deadline (0.")
    assert message.endswith("s of it spent queued)")


async def test_zero_timeout_is_an_expired_deadline() -> None:
    outcome, _ = await run(LocalBackend(workflow=Echo), request(agent_timeout_sec=0, grade=False))
    assert outcome.result.err_category == RolloutErrorCategory.TIMEOUT


class Blocking(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
        time.sleep(0.3)  # noqa: ASYNC251 - blocks the loop on purpose, so the deadline cannot fire
        return [{"role": "assistant", "content": "late"}]


async def test_returning_after_the_deadline_is_a_timeout() -> None:
    outcome, _ = await run(
        LocalBackend(workflow=Blocking), request(agent_timeout_sec=0.1, grade=False)
    )
    assert outcome.result.err_category == RolloutErrorCategory.TIMEOUT
    assert outcome.result.err_message == "workflow exceeded its 0.1s deadline"


class SwallowsCancel(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(5)
        return [{"role": "assistant", "content": "ignored the deadline"}]


async def test_swallowed_cancellation_is_still_a_timeout() -> None:
    outcome, _ = await run(
        LocalBackend(workflow=SwallowsCancel), request(agent_timeout_sec=0.1, grade=False)
    )
    assert outcome.result.err_category == RolloutErrorCategory.TIMEOUT


class HangingGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        await asyncio.sleep(10)


class RaisingGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        raise RuntimeError("judge offline")


class NanGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        ctx.set_reward(float("nan"))


class SilentGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        return None


class RemovingGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.sample.remove_sample = True


class ContextProbe(Grader):
    seen: ClassVar[list[object]] = []

    async def grade(self, ctx: GraderContext) -> None:
        ContextProbe.seen.append(get_rollout_context())
        ctx.set_reward(0.5)


@pytest.mark.parametrize(
    ("grader", "category", "message"),
    [
        (HangingGrader, "timeout", "grader exceeded its 0.2s deadline"),
        (RaisingGrader, "agent_error", "judge offline"),
        (NanGrader, "validation_error", None),
        (SilentGrader, "validation_error", "Sample has no reward after grading"),
    ],
)
async def test_grader_failures_keep_the_workflow_sample(
    grader: type[Grader], category: str, message: str | None
) -> None:
    outcome, statuses = await run(
        LocalBackend(workflow=Echo, grader=grader), request(grader_timeout_sec=0.2)
    )
    result = outcome.result
    assert statuses == ["running", "grading"]
    assert result.status == RolloutStatus.FAILURE
    assert result.err_category == category
    if message is not None:
        assert result.err_message == message
    assert result.sample is not None and result.sample.messages[-1]["content"] == "42"


async def test_remove_sample_needs_no_reward() -> None:
    outcome, _ = await run(LocalBackend(workflow=Echo, grader=RemovingGrader), request())
    assert outcome.result.status == RolloutStatus.SUCCESS
    assert outcome.result.sample is not None and outcome.result.sample.remove_sample


async def test_the_grader_sees_no_rollout_context() -> None:
    ContextProbe.seen.clear()
    outcome, _ = await run(LocalBackend(workflow=Echo, grader=ContextProbe), request())
    assert outcome.result.status == RolloutStatus.SUCCESS
    assert ContextProbe.seen == [None]


class ReturnsNothing(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
        rollout_ctx = get_rollout_context()
        assert rollout_ctx is not None and rollout_ctx.rollout_id == "r1"
        rollout_ctx.set_sample_source(FixedSource())
        with pytest.raises(ValueError):
            rollout_ctx.set_sample_source(FixedSource())


class FixedSource(SampleSource):
    async def get_sample(self) -> RolloutSample:
        return RolloutSample(messages=[{"role": "assistant", "content": "42"}], label="42")


async def test_a_workflow_returning_none_uses_its_sample_source() -> None:
    outcome, _ = await run(LocalBackend(workflow=ReturnsNothing, grader=ExactMatch), request())
    assert outcome.result.status == RolloutStatus.SUCCESS
    assert outcome.result.sample is not None and outcome.result.sample.reward == 1.0


class ReturnsJunk(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
        return {"not": "allowed"}


class ReturnsNoMessages(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        return AgentWorkflowOutput(metrics={"x": 1.0})


async def test_wrong_return_types_and_missing_samples() -> None:
    junk, _ = await run(LocalBackend(workflow=ReturnsJunk), request(grade=False))
    assert junk.result.err_category == RolloutErrorCategory.VALIDATION_ERROR
    assert junk.result.err_message == (
        "run() must return AgentWorkflowOutput, a message list, or None; got dict"
    )
    empty, _ = await run(LocalBackend(workflow=ReturnsNoMessages, grader=SilentGrader), request())
    assert empty.result.err_category == RolloutErrorCategory.VALIDATION_ERROR
    assert (empty.result.err_message or "").startswith("No sample to grade.")


async def test_workflow_config_is_copied_per_rollout() -> None:
    seen: list[object] = []

    class Recorder(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
            seen.append(ctx.config)

    config = AgentWorkflowConfig(name="cfg")
    await run(LocalBackend(workflow=Recorder, workflow_config=config), request(grade=False))
    assert seen[0] == config and seen[0] is not config


def test_concurrency_comes_from_the_workflow_config() -> None:
    assert LocalBackend(workflow=Echo).limiter.max_concurrent == 4
    unlimited = LocalBackend(workflow=Echo, workflow_config=AgentWorkflowConfig(name="u"))
    assert unlimited.limiter.max_concurrent is None
    assert unlimited.health() == {
        "status": "ok",
        "concurrency": {"max_concurrent": None, "queued": 0, "running": 0},
    }


def test_module_attr_strings_are_resolved() -> None:
    backend = LocalBackend(
        workflow="tests.server.plugins:Echo", grader="tests.server.plugins:ExactMatch"
    )
    assert backend.workflow_cls is Echo and backend.grader_cls is ExactMatch
    with pytest.raises(ValueError):
        resolve_object("no_colon_here")
    with pytest.raises(ImportError):
        resolve_object("tests.server.plugins:Missing")


def test_exceptions_are_classified_by_type_and_by_provider_class_name() -> None:
    class SandboxRateLimitException(Exception):
        pass

    class SandboxApiException(Exception):
        def __init__(self, status_code: int) -> None:
            super().__init__("sandbox")
            self.status_code = status_code

    assert classify_error(TimeoutError()) == RolloutErrorCategory.TIMEOUT
    assert classify_error(AssertionError()) == RolloutErrorCategory.VALIDATION_ERROR
    assert classify_error(TypeError()) == RolloutErrorCategory.VALIDATION_ERROR
    assert classify_error(SandboxRateLimitException()) == RolloutErrorCategory.HTTP_ERROR
    assert classify_error(SandboxApiException(503)) == RolloutErrorCategory.HTTP_ERROR
    assert classify_error(SandboxApiException(404)) == RolloutErrorCategory.AGENT_ERROR
    assert classify_error(OSError("chat endpoint down")) == RolloutErrorCategory.AGENT_ERROR


async def test_artifacts_only_when_a_root_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("_OSMOSIS_ROLLOUT_ARTIFACT_ROOT", raising=False)
    assert LocalBackend(workflow=Echo).artifact_root is None
    monkeypatch.setenv("_OSMOSIS_ROLLOUT_ARTIFACT_ROOT", str(tmp_path))
    seen: list[Path | None] = []

    class Writer(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            seen.append(ctx.artifacts_dir)
            return [{"role": "assistant", "content": "42"}]

    backend = LocalBackend(workflow=Writer)
    assert backend.artifact_root == tmp_path
    await run(backend, request(grade=False))
    assert seen == [tmp_path / "r1" / "artifacts"]
    assert (tmp_path / "r1" / "artifacts").is_dir()
    assert (tmp_path / "r1" / ".osmosis-health-check").exists()


def test_outcome_picks_the_published_and_the_saved_result() -> None:
    sample = RolloutSample(messages=[{"role": "assistant", "content": "x"}])
    ok = ExecutionResult(status=RolloutStatus.SUCCESS, sample=sample)
    failed_no_sample = ExecutionResult(status=RolloutStatus.FAILURE, err_message="e")
    graded = ExecutionResult(status=RolloutStatus.SUCCESS, sample=sample)
    assert ExecutionOutcome(workflow=ok, grader=graded).result is graded
    assert ExecutionOutcome(workflow=ok).result is ok
    borrowed = ExecutionOutcome(workflow=failed_no_sample, grader=graded).result
    assert borrowed.status == RolloutStatus.FAILURE and borrowed.sample is sample
    assert ExecutionOutcome(workflow=ok, grader=graded).result_to_save is graded
    assert ExecutionOutcome(workflow=ok, grader=failed_no_sample).result_to_save is ok


def test_sample_trajectory_copy_rules() -> None:
    sample = RolloutSample(messages=[{"role": "user", "content": "hi"}])
    assert sample.trajectory_messages == sample.messages
    assert sample.trajectory_messages is not sample.messages
    sample.reward = 1.0
    assert sample.trajectory_messages == [{"role": "user", "content": "hi"}]
    assert RolloutSample(messages=[], trajectory_messages=None).trajectory_messages is None
    received = RolloutSample.model_validate({"messages": [{"role": "user"}]}, context=RECEIVED)
    assert received.trajectory_messages is None  # a client's: nothing to persist
    with pytest.raises(ValueError):
        sample.reward = float("inf")


def test_execution_request_validates_like_the_wire() -> None:
    with pytest.raises(ValueError, match="single path segment"):
        request(id="../x")
    with pytest.raises(ValueError, match="timeout must be finite"):
        request(agent_timeout_sec=float("nan"))
    assert json.loads(request().model_dump_json())["grade"] is True
