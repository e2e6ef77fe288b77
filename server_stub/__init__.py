"""The embedded rollout server: the official plug-in API, served by our own implementation."""

from __future__ import annotations

from core.types import (
    MessageDict,
    Messages,
    RolloutErrorCategory,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutResultResponse,
    RolloutSample,
    RolloutStatus,
)
from server_stub.app import create_rollout_server
from server_stub.backend import (
    ExecutionBackend,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    LocalBackend,
)
from server_stub.workflow import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    BaseConfig,
    ConcurrencyConfig,
    Grader,
    GraderConfig,
    GraderContext,
    RolloutContext,
    SampleSource,
    get_rollout_context,
)

__all__ = [
    "AgentWorkflow",
    "AgentWorkflowConfig",
    "AgentWorkflowContext",
    "AgentWorkflowOutput",
    "BaseConfig",
    "ConcurrencyConfig",
    "ExecutionBackend",
    "ExecutionOutcome",
    "ExecutionRequest",
    "ExecutionResult",
    "Grader",
    "GraderConfig",
    "GraderContext",
    "LocalBackend",
    "MessageDict",
    "Messages",
    "RolloutContext",
    "RolloutErrorCategory",
    "RolloutInitRequest",
    "RolloutInitResponse",
    "RolloutResultResponse",
    "RolloutSample",
    "RolloutStatus",
    "SampleSource",
    "create_rollout_server",
    "get_rollout_context",
]
