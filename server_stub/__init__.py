"""The embedded rollout server: the official plug-in API, served by our own implementation.

`from server_stub import AgentWorkflow, Grader, ...` replaces `from osmosis_ai.rollout import ...`.
The names are loaded on first use (PEP 562): a rollout file importing the plug-in API does not
load the FastAPI app, and nothing here loads the rollout client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    )
    from server_stub.local_backend import LocalBackend
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

# Where the public names live, lightest first (see core/__init__.py).
_HOMES = (
    "core.types",
    "server_stub.workflow",
    "server_stub.backend",
    "server_stub.local_backend",
    "server_stub.app",
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


# Hidden from type checkers: a module-level __getattr__ would let a misspelt name pass as Any,
# while the imports above give every public name its real type.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        if name in __all__:
            for home in _HOMES:
                module = importlib.import_module(home)
                if name in vars(module):
                    value = vars(module)[name]
                    globals()[name] = value  # later lookups skip this function
                    return value
        raise AttributeError(f"module 'server_stub' has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
