"""Execution backends: the interface the server drives and what it exchanges with them
(PROTOCOL.md §4.3, §7); the in-process implementation is `server_stub.local_backend`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from pydantic import BaseModel, field_validator

from core.types import (
    RolloutErrorCategory,
    RolloutSample,
    RolloutStatus,
    ensure_finite_timeout,
    ensure_single_path_segment,
)
from server_stub.log_safety import server_logger

logger = server_logger(__name__)

ARTIFACT_ROOT_ENV = "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT"


class ExecutionRequest(BaseModel):
    """What the server hands a backend; the chat URL and key travel in the RolloutContext."""

    id: str
    prompt: list[dict[str, Any]]
    label: str | None = None
    metadata: dict[str, Any] | None = None
    agent_timeout_sec: float | None = None
    grader_timeout_sec: float | None = None
    grade: bool = True

    @field_validator("id")
    @classmethod
    def _single_segment(cls, value: str) -> str:
        return ensure_single_path_segment(value)

    @field_validator("agent_timeout_sec", "grader_timeout_sec")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        return ensure_finite_timeout(value)


class ExecutionResult(BaseModel):
    status: RolloutStatus
    sample: RolloutSample | None = None
    err_message: str | None = None
    err_category: RolloutErrorCategory | None = None
    # Backend diagnostics: written to diagnostics.json, never sent on the wire.
    extra_fields: dict[str, Any] | None = None


class ExecutionOutcome(BaseModel):
    workflow: ExecutionResult
    grader: ExecutionResult | None = None

    @property
    def result(self) -> ExecutionResult:
        """The result the server publishes (PROTOCOL.md §4.2 step 2)."""
        if self.workflow.status != RolloutStatus.SUCCESS:
            if self.workflow.sample is None and self.grader is not None:
                return self.workflow.model_copy(update={"sample": self.grader.sample})
            return self.workflow
        return self.grader if self.grader is not None else self.workflow

    @property
    def result_to_save(self) -> ExecutionResult:
        if self.grader is not None and self.grader.sample is not None:
            return self.grader
        return self.workflow


_HTTP_ERROR_CLASSES = frozenset(
    {
        "SandboxConnectionException",
        "SandboxRateLimitException",
        "PoolStateStoreUnavailableException",
    }
)
_HTTP_ERROR_STATUS_CLASSES = frozenset({"SandboxApiException", "SandboxAPIError"})
_HTTP_ERROR_STATUSES = frozenset({401, 402, 403, 429, 500, 502, 503, 504})


def classify_error(exc: BaseException) -> RolloutErrorCategory:
    """The wire category of an exception from workflow, grader or backend (PROTOCOL.md §3.1)."""
    if isinstance(exc, TimeoutError):
        return RolloutErrorCategory.TIMEOUT
    if isinstance(exc, (ValueError, TypeError, AssertionError)):
        return RolloutErrorCategory.VALIDATION_ERROR
    # Provider errors are recognised by class name so that no sandbox SDK has to be importable.
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _HTTP_ERROR_CLASSES:
        return RolloutErrorCategory.HTTP_ERROR
    status = getattr(exc, "status_code", None)
    if names & _HTTP_ERROR_STATUS_CLASSES and status in _HTTP_ERROR_STATUSES:
        return RolloutErrorCategory.HTTP_ERROR
    return RolloutErrorCategory.AGENT_ERROR


class ExecutionBackend(ABC):
    """Runs rollouts for the server. Only `execute` is required."""

    #: Our extension: True when the backend itself reports `running` (after any queueing of its
    #: own), so the server must not report it when the rollout task starts.
    reports_running: bool = False

    @abstractmethod
    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        """Run one rollout inside the ambient RolloutContext; must be cancellable."""

    def has_capacity(self) -> bool:
        return True

    def rollout_status(self, rollout_id: str) -> dict[str, Any] | None:
        return None

    def cancel_rollouts(
        self, ids: list[str] | None = None, prefix: str | None = None, all: bool = False
    ) -> dict[str, str]:
        return {}

    def health(self) -> dict[str, Any]:
        return {"status": "ok"}

    async def shutdown(self) -> None:
        return None
