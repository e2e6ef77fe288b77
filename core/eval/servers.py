"""The rollout servers an eval drives: capacity, health and which one gets the next rollout."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from core.client import RolloutClient
from core.errors import RolloutProtocolError
from core.handle import describe_error

logger = logging.getLogger(__name__)

HEALTH_INTERVAL_SEC = 2.0
# Consecutive failed health reads before a server counts as down.
DOWN_AFTER_FAILURES = 2

ServerState = Literal["accepting", "draining", "down"]


class AllServersDown(RuntimeError):
    """No server is left to send work to."""


@dataclass(eq=False)
class RolloutServerSlot:
    """One server as the eval sees it: its client, advertised capacity and what we sent it."""

    url: str
    client: RolloutClient
    capacity: int | None = None
    in_flight: int = 0
    process_id: str | None = None
    state: ServerState = "accepting"
    restarts: int = 0
    last_error: str | None = None
    health: dict[str, Any] = field(default_factory=dict)
    failures: int = 0

    @property
    def free(self) -> float:
        if self.state != "accepting":
            return 0
        if self.capacity is None:
            return float("inf")
        return self.capacity - self.in_flight


ServerListener = Callable[[RolloutServerSlot, str], None]


def _health_error(exc: BaseException) -> str:
    """Why a /health read failed, with the status a refusing server answered."""
    if not isinstance(exc, RolloutProtocolError) or exc.status_code == 200:
        return describe_error(exc)
    if exc.status_code in (401, 403):
        return (
            f"{exc}: HTTP {exc.status_code}; check --server-api-key "
            "(or $OSMOSIS_ROLLOUT_SERVER_API_KEY)"
        )
    return f"{exc}: HTTP {exc.status_code}"


class ServerPool:
    """Spreads rollouts over servers by free capacity and watches their health."""

    def __init__(self, slots: list[RolloutServerSlot]) -> None:
        if not slots:
            raise ValueError("at least one rollout server is needed")
        self.slots = slots
        self.listeners: list[ServerListener] = []
        self._freed = asyncio.Event()

    @classmethod
    def connect(
        cls, urls: list[str], *, http_client: httpx.AsyncClient, api_key: str | None
    ) -> ServerPool:
        return cls(
            [
                RolloutServerSlot(
                    url=url,
                    client=RolloutClient(url=url, http_client=http_client, api_key=api_key),
                )
                for url in urls
            ]
        )

    async def probe_all(self) -> None:
        """Read every server's /health once; servers that do not answer are marked down."""
        await asyncio.gather(*(self.probe(slot) for slot in self.slots))
        if all(slot.state == "down" for slot in self.slots):
            details = "; ".join(f"{s.url}: {s.last_error}" for s in self.slots)
            raise AllServersDown(f"no rollout server answered /health ({details})")

    def advertised_capacity(self) -> int | None:
        """Total `concurrency.max_concurrent` of the live servers (None if any is unbounded)."""
        live = [slot for slot in self.slots if slot.state != "down"]
        if not live or any(slot.capacity is None for slot in live):
            return None
        return sum(slot.capacity for slot in live if slot.capacity is not None)

    async def acquire(self) -> RolloutServerSlot:
        """The live server with the most free capacity; waits while all are full."""
        while True:
            live = [slot for slot in self.slots if slot.state != "down"]
            if not live:
                raise AllServersDown("every rollout server is down")
            best = max(live, key=lambda slot: slot.free)
            if best.free > 0:
                best.in_flight += 1
                return best
            self._freed.clear()
            await self._freed.wait()

    def release(self, slot: RolloutServerSlot) -> None:
        slot.in_flight -= 1
        self._freed.set()

    async def watch(self) -> None:
        """Poll every server's health until cancelled: restarts, drains, outages."""
        while True:
            await asyncio.sleep(HEALTH_INTERVAL_SEC)
            await asyncio.gather(*(self.probe(slot) for slot in self.slots))

    async def probe(self, slot: RolloutServerSlot) -> None:
        try:
            health = await slot.client.health()
        except (httpx.HTTPError, RolloutProtocolError, OSError) as exc:
            slot.failures += 1
            slot.last_error = _health_error(exc)
            if slot.state != "down" and (slot.failures >= DOWN_AFTER_FAILURES or not slot.health):
                slot.state = "down"
                self._tell(slot, f"down: {slot.last_error}")
                self._freed.set()  # waiting workers must look again
            return
        slot.failures = 0
        slot.last_error = None
        slot.health = health
        concurrency = health.get("concurrency")
        if isinstance(concurrency, dict):
            maximum = concurrency.get("max_concurrent")
            slot.capacity = maximum if isinstance(maximum, int) and maximum > 0 else None
        process_id = health.get("process_id")
        if slot.process_id is not None and process_id != slot.process_id:
            slot.restarts += 1
            self._tell(
                slot, "restarted (its process_id changed): rollouts in flight there are lost"
            )
        slot.process_id = process_id if isinstance(process_id, str) else None
        lifecycle = health.get("lifecycle")
        accepting = not isinstance(lifecycle, dict) or lifecycle.get("accepting_rollouts", True)
        new_state: ServerState = "accepting" if accepting else "draining"
        if new_state != slot.state:
            previous, slot.state = slot.state, new_state
            self._tell(slot, "back up" if previous == "down" else new_state)
            self._freed.set()

    def _tell(self, slot: RolloutServerSlot, event: str) -> None:
        logger.warning("rollout server %s %s", slot.url, event)
        for listener in self.listeners:
            listener(slot, event)
