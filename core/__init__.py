"""The headless engine: the rollout client, its handles and the wire types.

`from core import RolloutClient` replaces `from osmosis_ai.rollout.client import RolloutClient`.
"""

from __future__ import annotations

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
