"""What the server publishes besides the API (PROTOCOL.md §8): ownership events and live
previews, both fed by the statuses the registry gives each rollout, both off unless configured.
"""

from __future__ import annotations

import asyncio
import os

from core.types import RolloutInitRequest, RolloutStatus
from server_stub.ownership import OwnershipFeed
from server_stub.previews import PreviewFeed
from server_stub.registry import StatusObserver
from server_stub.workflow import RolloutContext


class RolloutFeeds:
    """Both feeds of one server: `start()` at server start, `watch()` per admission, `close()`
    at shutdown (after the last rollout reached its terminal status)."""

    def __init__(
        self,
        *,
        otlp_endpoint: str | None = None,
        preview_root: str | os.PathLike[str] | None = None,
    ) -> None:
        self.ownership = OwnershipFeed(otlp_endpoint)
        self.previews = PreviewFeed(preview_root)

    def start(self) -> None:
        self.ownership.start()
        self.previews.start()

    def watch(self, request: RolloutInitRequest, context: RolloutContext) -> StatusObserver | None:
        """The observer of one admitted rollout, or None when no feed publishes anything for it."""
        tags = self.ownership.tags(request.rollout_id, request.metadata)
        publisher = self.previews.publisher(request.rollout_id, context)
        if tags is None and publisher is None:
            return None
        ownership = self.ownership

        def observe(status: RolloutStatus) -> None:
            if tags is not None:
                ownership.record(tags, status)
            if publisher is not None:
                publisher.observe(status)

        return observe

    async def close(self) -> None:
        await self.previews.close()
        # Flushing waits for the exporter's HTTP round trip: not on the event loop.
        await asyncio.to_thread(self.ownership.close)
