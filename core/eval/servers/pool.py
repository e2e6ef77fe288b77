"""The rollout servers an eval drives: capacity, health and which one gets the next rollout.

With a `ServerDirectory` (names that stand for several addresses, a servers file) the pool
follows it while the run lives: a server that joins the list is probed and used; one that
leaves it takes no new work, keeps what is in flight there until it ends, and is dropped from
the pool then. Servers are told apart by their /health `instance_id`: a URL that reaches a
server the pool has already (another name, another address of it) is not a second server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from core.client import RolloutClient
from core.errors import RolloutProtocolError, describe_error
from core.eval.errors import EvalError
from core.eval.servers.directory import ServerDirectory
from core.eval.servers.fd_budget import out_of_descriptors
from core.eval.timeline.model import DRAINED

logger = logging.getLogger(__name__)

HEALTH_INTERVAL_SEC = 2.0
# How often a directory's names are resolved again and its servers file looked at.
DISCOVERY_INTERVAL_SEC = 5.0
# Consecutive failed health reads before a server counts as down.
DOWN_AFTER_FAILURES = 2
# A /health read that takes longer than this counts as failed (a server that accepts
# connections and never answers must not hold up the run).
HEALTH_TIMEOUT_SEC = 10.0
# When every server is down, how long to wait for one to come back (a restart) before the run
# stops, and how often to look meanwhile.
RECOVERY_GRACE_SEC = 10.0
RECOVERY_PROBE_SEC = 0.5
# The eval's admission deadline per rollout (PROTOCOL.md §5.7): every POST attempt and every
# 429 wait. A server that takes the request and never answers is reported by this deadline.
# It also bounds the wait for a server to accept rollouts again while every live one is
# draining (`accepting_rollouts: false`): the same "not now" as a 429, given the same time.
ADMISSION_TIMEOUT_SEC = 60.0
# Each server's client makes its own connections (so its polls skip httpx's request objects,
# core.wire): one long-poll per rollout in flight, plus admissions, cancels and health reads.
POOL_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=512)
# No read timeout of its own: every call bounds itself (polls by the long-poll hold,
# admissions by their deadline, health reads and cancels by theirs), so a server that never
# answers is reported by the right one.
POOL_TIMEOUT = httpx.Timeout(30.0, read=None)

ServerState = Literal["accepting", "draining", "down"]


class AllServersDown(EvalError, RuntimeError):
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
    publishes_events: bool = False
    """Its ownership events reach the run (EVAL.md §6): they tell every status, so its
    rollouts are polled without asking for each one (`observe_every_status=False`)."""
    first_admitted_at: float | None = None
    """When it admitted the run's first rollout (monotonic): its events are due from then."""
    instance_id: str | None = None
    """Its /health `instance_id`: one server whatever the URL it is reached by."""
    listed: bool = True
    """Still among the run's servers (its directory lists it): one that left the list takes
    no new work, and what is in flight there finishes."""
    drained: bool = False
    """The operator drained it (`ServerPool.drain`): no new work until undrained; what is in
    flight there finishes."""
    health_ms: float | None = None
    """How long its latest answered /health read took."""

    @property
    def free(self) -> float:
        """Rollouts it can take now; unbounded when it advertises no capacity."""
        if self.state != "accepting" or not self.listed or self.drained:
            return 0
        if self.capacity is None:
            return float("inf")
        return self.capacity - self.in_flight


ServerListener = Callable[[RolloutServerSlot, str], None]


def shown_state(slot: RolloutServerSlot, *, run_over: bool, launched: bool) -> str:
    """A server's state as a front end shows it: the last one seen (`drained` for one that
    accepts but the operator drained), but `stopped` once the run is over if the run
    `launched` it (the embedded demo, a workspace's server): it stopped with the run. Nobody
    watches another's server once the run is over: its last state."""
    if run_over and launched:
        return "stopped"
    return DRAINED if slot.drained and slot.state == "accepting" else slot.state


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


def _not_accepting(slot: RolloutServerSlot) -> str:
    if slot.state == "down":
        return f"down: {slot.last_error}"
    return "draining, its /health says accepting_rollouts: false"


def _least_loaded(live: list[RolloutServerSlot]) -> RolloutServerSlot | None:
    """The server with the most room left, None when every one is full (or not accepting).

    A server that advertises no capacity (the official backend's default /health says only
    "status") is never full; it is ranked as if it had the largest capacity any server here
    advertises (0 when none does), so what counts is what we have in flight on it: such
    servers share the work evenly, and with the others, instead of the first of them getting
    all of it. Ties go to the first.
    """
    open_ = [slot for slot in live if slot.free > 0]
    if not open_:
        return None
    nominal = max((slot.capacity for slot in live if slot.capacity is not None), default=0)
    return max(
        open_,
        key=lambda slot: (nominal if slot.capacity is None else slot.capacity) - slot.in_flight,
    )


class ServerPool:
    """Spreads rollouts over servers by free capacity (by what is in flight on those that
    advertise none) and watches their health."""

    def __init__(
        self,
        slots: list[RolloutServerSlot],
        *,
        on_event: ServerListener | None = None,
        directory: ServerDirectory | None = None,
        api_key: str | None = None,
    ) -> None:
        """`on_event(slot, event)` hears of each change of a server (down, back up,
        restarted, draining, joined, left), after it is logged. `directory`: where to look for
        servers that join or leave while the run lives (`refresh`), reached with `api_key`.
        Once set, `on_servers_changed()` hears that some did."""
        if not slots:
            raise ValueError("at least one rollout server is needed")
        # Replaced, never changed in place: a reader iterating it never sees it change.
        self.slots = slots
        self._on_event = on_event
        self._directory = directory
        self._api_key = api_key
        self.on_servers_changed: Callable[[], None] | None = None
        # URLs that reach a server the pool has under another URL: instance_id by URL.
        self._aliases: dict[str, str | None] = {}
        # The clients of servers no longer in the pool, being closed.
        self._closing: set[asyncio.Task[None]] = set()
        self._freed = asyncio.Event()
        # Shared by every worker waiting for a server to come back while all are down.
        self._recovery: asyncio.Task[bool] | None = None

    @classmethod
    def connect(
        cls,
        urls: list[str],
        *,
        api_key: str | None,
        on_event: ServerListener | None = None,
        directory: ServerDirectory | None = None,
    ) -> ServerPool:
        """A slot per URL, each with a client of its own; `aclose()` closes them."""
        return cls(
            [_slot(url, api_key) for url in urls],
            on_event=on_event,
            directory=directory,
            api_key=api_key,
        )

    async def probe_all(self) -> None:
        """Read every server's /health once; servers that do not answer are marked down, and
        a URL that reaches a server listed before it is not a second server."""
        await asyncio.gather(*(self.probe(slot) for slot in self.slots))
        kept: list[RolloutServerSlot] = []
        for slot in self.slots:
            same = _same_server(slot, kept)
            if same is None:
                kept.append(slot)
            else:
                self._alias(slot, same)
        self.slots = kept
        if all(slot.state == "down" for slot in self.slots):
            details = "; ".join(f"{s.url}: {s.last_error}" for s in self.slots)
            raise AllServersDown(f"no rollout server answered /health ({details})")

    async def refresh(self) -> None:
        """Look at the directory again: probe and use the servers that joined it, take no new
        work to those that left it (dropped once nothing is in flight there)."""
        if self._directory is None:
            return
        listed = set(await self._directory.endpoints())
        known = {slot.url for slot in self.slots}
        changed = False
        for slot in self.slots:
            if slot.listed != (slot.url in listed):
                changed = True
                slot.listed = not slot.listed
                self._tell(
                    slot,
                    "joined the servers again"
                    if slot.listed
                    else f"left the servers: no new work ({slot.in_flight} in flight there)",
                )
        joining = [
            _slot(url, self._api_key)
            for url in listed
            if url not in known and url not in self._aliases
        ]
        await asyncio.gather(*(self.probe(slot, quiet=True) for slot in joining))
        for slot in joining:
            same = _same_server(slot, [s for s in self.slots if s.listed])
            if same is not None:
                self._alias(slot, same)
                continue
            self.slots = [*self.slots, slot]
            changed = True
            self._tell(slot, f"joined the servers ({slot.state})")
        # An alias whose name is no longer listed may be a server of its own next time.
        self._aliases = {url: i for url, i in self._aliases.items() if url in listed}
        self._drop_left()
        self._freed.set()  # waiting workers must look again
        if changed and self.on_servers_changed is not None:
            self.on_servers_changed()

    def _alias(self, slot: RolloutServerSlot, same: RolloutServerSlot) -> None:
        self._aliases[slot.url] = slot.instance_id
        logger.warning(
            "rollout server %s is %s (the same instance_id): one server", slot.url, same.url
        )
        self._close(slot)

    def _close(self, slot: RolloutServerSlot) -> None:
        task = asyncio.ensure_future(slot.client.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _drop_left(self) -> None:
        """Drop the servers that left the list and have nothing in flight any more."""
        gone = [slot for slot in self.slots if not slot.listed and slot.in_flight == 0]
        if gone:
            self.slots = [slot for slot in self.slots if slot not in gone]
            for slot in gone:
                self._close(slot)

    def advertised_capacity(self) -> int | None:
        """Total `concurrency.max_concurrent` of the live servers (None if any is unbounded)."""
        live = [slot for slot in self.slots if slot.state != "down" and slot.listed]
        if not live or any(slot.capacity is None for slot in live):
            return None
        return sum(slot.capacity for slot in live if slot.capacity is not None)

    async def acquire(self, avoid: str | None = None) -> RolloutServerSlot:
        """The live server with the most room left (`_least_loaded`); waits while all are full.
        One other than the server at `avoid` (a hedge's first attempt's) when another has room.

        While every server is down it waits up to `RECOVERY_GRACE_SEC` for one to come back
        (a restarted server is used again), then raises `AllServersDown`; while none is down
        or accepting (all draining), it waits up to `ADMISSION_TIMEOUT_SEC` for one to accept
        again, then raises the same.
        """
        loop = asyncio.get_running_loop()
        accepting_by: float | None = None  # set while no live server accepts rollouts
        while True:
            live = [slot for slot in self.slots if slot.state != "down" and slot.listed]
            if not live:
                if self._recovery is None or self._recovery.done():
                    self._recovery = asyncio.ensure_future(self._recover())
                if not await asyncio.shield(self._recovery):
                    details = "; ".join(f"{s.url}: {s.last_error}" for s in self.slots)
                    raise AllServersDown(
                        f"every rollout server is down and none came back within "
                        f"{RECOVERY_GRACE_SEC:g} s ({details})"
                    )
                continue
            others = [slot for slot in live if slot.url != avoid]
            best = _least_loaded(others) or _least_loaded(live)
            if best is not None:
                best.in_flight += 1
                return best
            self._freed.clear()
            if any(slot.state == "accepting" for slot in live):
                accepting_by = None  # only full: what is in flight frees a slot
                await self._freed.wait()
                continue
            if accepting_by is None:
                accepting_by = loop.time() + ADMISSION_TIMEOUT_SEC
            remaining = accepting_by - loop.time()
            if remaining <= 0:
                details = "; ".join(f"{s.url}: {_not_accepting(s)}" for s in self.slots)
                raise AllServersDown(
                    f"no rollout server accepted rollouts within {ADMISSION_TIMEOUT_SEC:g} s "
                    f"({details})"
                )
            with contextlib.suppress(asyncio.TimeoutError):  # not the builtin one on 3.10
                await asyncio.wait_for(self._freed.wait(), remaining)

    def other_with_room(self, avoid: str) -> RolloutServerSlot | None:
        """At once, without waiting: a live server other than the one at `avoid` with room
        left (taken, as `acquire` takes it), else None."""
        others = [s for s in self.slots if s.state != "down" and s.listed and s.url != avoid]
        best = _least_loaded(others)
        if best is not None:
            best.in_flight += 1
        return best

    def drain(self, url: str, drained: bool = True) -> RolloutServerSlot:
        """Send the server at `url` no new work (`drained`), or send it work again; what is
        in flight there goes on. `KeyError` when no server of the pool has that URL."""
        slot = next((slot for slot in self.slots if slot.url == url), None)
        if slot is None:
            raise KeyError(url)
        slot.drained = drained
        self._freed.set()  # waiting workers must look again
        return slot

    def release(self, slot: RolloutServerSlot) -> None:
        slot.in_flight -= 1
        if not slot.listed:
            self._drop_left()
        self._freed.set()

    async def aclose(self) -> None:
        """Close the servers' clients (after the run: their handles are done)."""
        await asyncio.gather(*(slot.client.aclose() for slot in self.slots), *self._closing)

    def silent(self, now: float, grace_sec: float) -> list[str]:
        """The servers that admitted a rollout more than `grace_sec` ago and sent no event."""
        return [
            slot.url
            for slot in self.slots
            if not slot.publishes_events
            and slot.first_admitted_at is not None
            and now - slot.first_admitted_at > grace_sec
        ]

    def heard_from(self, url: str) -> None:
        """An ownership event came for a rollout sent to the server at `url`."""
        for slot in self.slots:
            if slot.url == url:
                slot.publishes_events = True

    def stop(self) -> None:
        """Stop looking for servers to come back (the run is over)."""
        if self._recovery is not None:
            self._recovery.cancel()

    async def _recover(self) -> bool:
        """Probe the down servers until one answers (True) or the grace period ends (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RECOVERY_GRACE_SEC
        while True:
            await self.refresh()  # a server may have joined meanwhile
            await asyncio.gather(*(self.probe(s) for s in self.slots if s.state == "down"))
            if any(slot.state != "down" and slot.listed for slot in self.slots):
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(min(RECOVERY_PROBE_SEC, max(0.0, deadline - loop.time())))

    async def watch(self) -> None:
        """Poll every server's health until cancelled: restarts, drains, outages; and look
        at the directory every `DISCOVERY_INTERVAL_SEC`: servers joining and leaving."""
        loop = asyncio.get_running_loop()
        looked = loop.time()
        while True:
            await asyncio.sleep(HEALTH_INTERVAL_SEC)
            if loop.time() - looked >= DISCOVERY_INTERVAL_SEC:
                looked = loop.time()
                await self.refresh()
            await asyncio.gather(*(self.probe(slot) for slot in self.slots))

    async def probe(
        self, slot: RolloutServerSlot, *, after_failure: bool = False, quiet: bool = False
    ) -> None:
        """Read one server's /health and update its state.

        `after_failure`: a request to this server just failed, so a failed read now is the
        second failure in a row and the server counts as down at once. `quiet`: the server
        is not in the pool yet (joining): its state is set, and said when it joins.
        """
        asked = time.monotonic()
        try:
            health = await asyncio.wait_for(slot.client.health(), HEALTH_TIMEOUT_SEC)
        except (httpx.HTTPError, RolloutProtocolError, OSError, asyncio.TimeoutError) as exc:
            if out_of_descriptors(exc):
                # This process has no descriptor left to ask with: nothing is known of the
                # server, which is not marked down for our own limit.
                slot.last_error = f"not read: this process is out of file descriptors ({exc})"
                logger.warning("rollout server %s: /health %s", slot.url, slot.last_error)
                return
            slot.failures += 1
            slot.last_error = (
                f"no answer to /health within {HEALTH_TIMEOUT_SEC:g} s"
                if isinstance(exc, asyncio.TimeoutError) and not isinstance(exc, httpx.HTTPError)
                else _health_error(exc)
            )
            down = slot.failures >= DOWN_AFTER_FAILURES or not slot.health or after_failure
            if slot.state != "down" and down:
                slot.state = "down"
                if not quiet:
                    self._tell(slot, f"down: {slot.last_error}")
                self._freed.set()  # waiting workers must look again
            return
        slot.failures = 0
        slot.last_error = None
        slot.health = health
        slot.health_ms = (time.monotonic() - asked) * 1000.0
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
        instance_id = health.get("instance_id")
        slot.instance_id = instance_id if isinstance(instance_id, str) else slot.process_id
        lifecycle = health.get("lifecycle")
        accepting = not isinstance(lifecycle, dict) or lifecycle.get("accepting_rollouts", True)
        new_state: ServerState = "accepting" if accepting else "draining"
        if new_state != slot.state:
            previous, slot.state = slot.state, new_state
            if not quiet:
                self._tell(slot, "back up" if previous == "down" else new_state)
            self._freed.set()

    def _tell(self, slot: RolloutServerSlot, event: str) -> None:
        logger.warning("rollout server %s %s", slot.url, event)
        if self._on_event is not None:
            self._on_event(slot, event)


def _slot(url: str, api_key: str | None) -> RolloutServerSlot:
    """A server reached at `url`, with a client of its own."""
    return RolloutServerSlot(
        url=url,
        client=RolloutClient(
            url=url,
            api_key=api_key,
            # Read at call time, so tests can shorten it.
            admission_timeout_sec=ADMISSION_TIMEOUT_SEC,
            limits=POOL_LIMITS,
            timeout=POOL_TIMEOUT,
        ),
    )


def _same_server(
    slot: RolloutServerSlot, others: list[RolloutServerSlot]
) -> RolloutServerSlot | None:
    """The server among `others` that `slot` reaches under another URL (the same /health
    `instance_id`), if any; a server that did not answer is nobody's alias."""
    if slot.instance_id is None:
        return None
    return next((o for o in others if o.instance_id == slot.instance_id), None)
