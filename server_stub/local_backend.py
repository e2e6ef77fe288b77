"""LocalBackend: runs the workflow and the grader in this process, with per-phase deadlines,
a concurrency limit and the grading rules (PROTOCOL.md §4.3, §7)."""

from __future__ import annotations

import asyncio
import copy
import importlib
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from core.types import (
    RolloutErrorCategory,
    RolloutSample,
    RolloutStatus,
)
from server_stub.backend import (
    ARTIFACT_ROOT_ENV,
    ExecutionBackend,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    classify_error,
)
from server_stub.log_safety import server_logger
from server_stub.workflow import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    Grader,
    GraderConfig,
    GraderContext,
    RolloutContext,
    get_rollout_context,
)

logger = server_logger(__name__)


def resolve_object(spec: Any) -> Any:
    """Accept an object, or a `"module:attr"` string naming one (imported now)."""
    if not isinstance(spec, str):
        return spec
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected 'module:attr', got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ImportError(f"{module_name!r} has no attribute {attr!r}") from exc
    return obj


class ConcurrencyLimiter:
    """A semaphore that also counts who waits for a slot and who holds one (for /health)."""

    def __init__(self, max_concurrent: int | None) -> None:
        self.max_concurrent = max_concurrent
        self.queued = 0
        self.running = 0
        self._slots = asyncio.Semaphore(max_concurrent) if max_concurrent is not None else None

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[None]:
        if self._slots is not None:
            self.queued += 1
            try:
                await self._slots.acquire()
            finally:
                self.queued -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            if self._slots is not None:
                self._slots.release()

    def snapshot(self) -> dict[str, int | None]:
        return {
            "max_concurrent": self.max_concurrent,
            "queued": self.queued,
            "running": self.running,
        }


def _deadline_message(phase: str, limit: float | None, queued_sec: float = 0.0) -> str:
    message = f"{phase} exceeded its {float(limit) if limit is not None else limit}s deadline"
    if queued_sec >= 0.1:
        message += f" ({queued_sec:.1f}s of it spent queued)"
    return message


class LocalBackend(ExecutionBackend):
    """Runs the workflow then the grader in this process, `max_concurrent` at a time.

    Deliberate improvements over the official LocalBackend (documented in README):
    a rollout waiting for a slot reports `queued` (not `running`); "grading requested but
    impossible" fails with `validation_error` and a message naming what is missing;
    `max_pending` makes `has_capacity()` false once that many rollouts wait for a slot;
    artifacts are written only when an artifact root is configured.
    """

    reports_running = True

    def __init__(
        self,
        *,
        workflow: type[AgentWorkflow[Any]] | str,
        workflow_config: AgentWorkflowConfig | str | None = None,
        grader: type[Grader] | str | None = None,
        grader_config: GraderConfig | str | None = None,
        max_pending: int | None = None,
        artifact_root: Path | str | None = None,
    ) -> None:
        if max_pending is not None and max_pending < 0:
            raise ValueError("max_pending must be >= 0 when set")
        self.workflow_cls: type[AgentWorkflow[Any]] = resolve_object(workflow)
        self.workflow_config: AgentWorkflowConfig | None = (
            resolve_object(workflow_config) if workflow_config else None
        )
        self.grader_cls: type[Grader] | None = resolve_object(grader) if grader else None
        self.grader_config: GraderConfig | None = (
            resolve_object(grader_config) if grader_config else None
        )
        self.max_pending = max_pending
        max_concurrent = (
            self.workflow_config.concurrency.max_concurrent if self.workflow_config else 4
        )
        self.limiter = ConcurrencyLimiter(max_concurrent)
        root = artifact_root if artifact_root is not None else os.environ.get(ARTIFACT_ROOT_ENV)
        self.artifact_root: Path | None = Path(root) if root else None

    def has_capacity(self) -> bool:
        """False once admitting one more would make more than `max_pending` wait for a slot.

        Counts rollouts that already reached the slot queue; one admitted in the same event-loop
        tick as another is counted from its first step, so a burst can overshoot by that much.
        """
        limit, slots = self.max_pending, self.limiter.max_concurrent
        if limit is None or slots is None:
            return True
        return self.limiter.running + self.limiter.queued < slots + limit

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "concurrency": self.limiter.snapshot()}

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        # Captured now: the context variable is cleared when the workflow's block exits, and the
        # grader runs outside it, but grading must still be reported.
        rollout_ctx = get_rollout_context() or RolloutContext()
        enqueued = time.monotonic()
        async with self.limiter.acquire():
            queued_sec = time.monotonic() - enqueued
            await rollout_ctx.set_status(RolloutStatus.RUNNING)
            artifacts_dir = await self._artifacts_dir(request.id)
            result = await self._run_workflow(request, rollout_ctx, queued_sec, artifacts_dir)
            if not request.grade or result.status != RolloutStatus.SUCCESS:
                return ExecutionOutcome(workflow=result)
            missing = self._grading_gap(request)
            if missing:
                return ExecutionOutcome(
                    workflow=result,
                    grader=ExecutionResult(
                        status=RolloutStatus.FAILURE,
                        sample=result.sample,
                        err_message=f"grading was requested but {missing}; "
                        "send grade=false to skip grading",
                        err_category=RolloutErrorCategory.VALIDATION_ERROR,
                    ),
                )
            await rollout_ctx.set_status(RolloutStatus.GRADING)
            graded = await self._run_grader(request, result, artifacts_dir)
            return ExecutionOutcome(workflow=result, grader=graded)

    def _grading_gap(self, request: ExecutionRequest) -> str | None:
        if self.grader_cls is None:
            return "this server has no grader"
        if request.label is None and request.metadata is None:
            return "the rollout has neither a label nor metadata"
        return None

    async def _run_workflow(
        self,
        request: ExecutionRequest,
        rollout_ctx: RolloutContext,
        queued_sec: float,
        artifacts_dir: Path | None,
    ) -> ExecutionResult:
        config = copy.deepcopy(self.workflow_config)
        ctx: AgentWorkflowContext[Any] = AgentWorkflowContext(
            prompt=request.prompt,
            config=config,
            metadata=request.metadata,
            artifacts_dir=artifacts_dir,
        )
        limit = request.agent_timeout_sec
        # The caller's clock started at admission, so time spent queued comes out of the budget.
        clock = _PhaseClock(
            "workflow", limit, None if limit is None else max(limit - queued_sec, 0.0), queued_sec
        )
        failure: Exception | None = None
        sample: RolloutSample | None = None
        with anyio.move_on_after(clock.budget) as deadline:
            try:
                with rollout_ctx:
                    output = _coerce_output(await self.workflow_cls(config).run(ctx))
                    if output is None:
                        sample = await rollout_ctx.get_sample()
                    elif output.messages is not None:
                        sample = RolloutSample(
                            messages=output.messages,
                            label=request.label,
                            metrics=dict(output.metrics),
                        )
            except Exception as exc:
                failure = exc
        return clock.outcome(deadline, failure, sample, request.id)

    async def _run_grader(
        self, request: ExecutionRequest, result: ExecutionResult, artifacts_dir: Path | None
    ) -> ExecutionResult:
        grader_cls = self.grader_cls
        assert grader_cls is not None
        grader_ctx = GraderContext(
            label=request.label,
            sample=result.sample,
            metadata=request.metadata,
            artifacts_dir=artifacts_dir,
        )
        # An independent budget: a workflow that used all of its time still gets graded fully.
        limit = request.grader_timeout_sec
        clock = _PhaseClock("grader", limit, limit)
        failure: Exception | None = None
        with anyio.move_on_after(clock.budget) as deadline:
            try:
                await grader_cls(self.grader_config).grade(grader_ctx)
                _require_reward(grader_ctx.sample)
            except Exception as exc:
                failure = exc
        graded = clock.outcome(deadline, failure, grader_ctx.sample, request.id)
        if graded.status != RolloutStatus.SUCCESS:
            # The workflow's sample is kept on a grading failure (the server masks its reward).
            graded.sample = result.sample
        return graded

    async def _artifacts_dir(self, rollout_id: str) -> Path | None:
        """`<root>/<id>/artifacts/`, verified writable; None when unset or unusable."""
        if self.artifact_root is None:
            return None
        base = self.artifact_root / rollout_id
        for delay in (0.5, 1.0, None):
            try:
                (base / "artifacts").mkdir(parents=True, exist_ok=True)
                (base / ".osmosis-health-check").write_text("ok\n")
                return base / "artifacts"
            except OSError as exc:
                if delay is None:
                    logger.warning("artifacts folder for %s is unusable: %s", rollout_id, exc)
                    return None
                await asyncio.sleep(delay)
        return None


def _coerce_output(value: Any) -> AgentWorkflowOutput | None:
    if value is None:
        return None
    if isinstance(value, AgentWorkflowOutput):
        return AgentWorkflowOutput.model_validate(value)
    if isinstance(value, list):
        return AgentWorkflowOutput(messages=value)
    raise TypeError(
        "run() must return AgentWorkflowOutput, a message list, or None; "
        f"got {type(value).__name__}"
    )


def _require_reward(sample: RolloutSample | None) -> None:
    if sample is None:
        raise ValueError("No sample to grade. The workflow returned no messages and no sample.")
    if sample.reward is None and not sample.remove_sample:
        raise ValueError("Sample has no reward after grading")


@dataclass
class _PhaseClock:
    """One phase's deadline bookkeeping; built just before the phase starts."""

    phase: str
    limit: float | None  # what the caller asked for, named in the message
    budget: float | None  # what is left of it (less time spent queued)
    queued_sec: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def outcome(
        self,
        deadline: anyio.CancelScope,
        failure: Exception | None,
        sample: RolloutSample | None,
        rollout_id: str,
    ) -> ExecutionResult:
        """Turn how the phase ended into a result; our own deadline is named as such.

        A phase that returned after its deadline (it swallowed the cancellation, or blocked
        the event loop so the deadline could not fire) is a timeout too: success after the
        caller stopped waiting would be a lie.
        """
        overran = self.budget is not None and time.monotonic() - self.started > self.budget
        if failure is not None:
            logger.warning("%s of rollout %s failed: %r", self.phase, rollout_id, failure)
        if deadline.cancel_called or (failure is None and overran):
            return ExecutionResult(
                status=RolloutStatus.FAILURE,
                err_message=_deadline_message(self.phase, self.limit, self.queued_sec),
                err_category=RolloutErrorCategory.TIMEOUT,
            )
        if failure is not None:
            return ExecutionResult(
                status=RolloutStatus.FAILURE,
                err_message=str(failure),
                err_category=classify_error(failure),
            )
        return ExecutionResult(status=RolloutStatus.SUCCESS, sample=sample)
