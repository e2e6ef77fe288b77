"""The headless engine: the rollout client, its handles and the wire types.

`from core import RolloutClient` replaces `from osmosis_ai.rollout.client import RolloutClient`.

The names below are loaded on first use (PEP 562), so importing one light module such as
`core.types` or `core.eval.results.events` does not drag in the HTTP client and its transport.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.client import RolloutClient
    from core.errors import RolloutAdmissionTimeoutError, RolloutProtocolError
    from core.handle import RolloutHandle, SkipReason, Transition
    from core.types import (
        PHASE_ORDER,
        POLLING_LEASE_HEADER,
        TERMINAL_STATUSES,
        CancelDisposition,
        CancelRolloutsRequest,
        CancelRolloutsResponse,
        MessageDict,
        Messages,
        RolloutErrorCategory,
        RolloutInitRequest,
        RolloutInitResponse,
        RolloutLifecycle,
        RolloutResultResponse,
        RolloutSample,
        RolloutStatus,
    )

# Where the public names live, lightest first: a name is looked up module by module, so
# `from core import RolloutStatus` loads only the wire types.
_HOMES = ("core.types", "core.errors", "core.handle", "core.client")

__all__ = [
    "PHASE_ORDER",
    "POLLING_LEASE_HEADER",
    "TERMINAL_STATUSES",
    "CancelDisposition",
    "CancelRolloutsRequest",
    "CancelRolloutsResponse",
    "MessageDict",
    "Messages",
    "RolloutAdmissionTimeoutError",
    "RolloutClient",
    "RolloutErrorCategory",
    "RolloutHandle",
    "RolloutInitRequest",
    "RolloutInitResponse",
    "RolloutLifecycle",
    "RolloutProtocolError",
    "RolloutResultResponse",
    "RolloutSample",
    "RolloutStatus",
    "SkipReason",
    "Transition",
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
        raise AttributeError(f"module 'core' has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
