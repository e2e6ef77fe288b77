"""What the server publishes besides the API (PROTOCOL.md §8): ownership events, fed by the
statuses the registry gives each rollout, off unless configured.
"""

from __future__ import annotations

import asyncio

from core.types import RolloutInitRequest, RolloutStatus
from server_stub.ownership import OwnershipFeed
from server_stub.registry import StatusObserver
from server_stub.workflow import RolloutContext


class RolloutFeeds:
    """The feeds of one server: `start()` at server start, `watch()` per admission, `close()`
    at shutdown (after the last rollout reached its terminal status)."""

    def __init__(
        self,
        *,
        otlp_endpoint: str | None = None,
    ) -> None:
        self.ownership = OwnershipFeed(otlp_endpoint)

    def start(self) -> None:
        self.ownership.start()

    def watch(self, request: RolloutInitRequest, context: RolloutContext) -> StatusObserver | None:
        """The observer of one admitted rollout, or None when no feed publishes anything for it."""
        tags = self.ownership.tags(request.rollout_id, request.metadata)
        if tags is None:
            return None
        ownership = self.ownership

        def observe(status: RolloutStatus) -> None:
            ownership.record(tags, status)

        return observe

    async def close(self) -> None:
        # Flushing waits for the exporter's HTTP round trip: not on the event loop.
        await asyncio.to_thread(self.ownership.close)
