"""The server's rollout registry: results, leases, long-poll waiters, cancellation, retention.

Everything here runs on the event loop thread and none of the state-changing methods await,
so each of them is atomic without a lock (the official server serialises the same steps with
an asyncio.Lock).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TypeAlias

from core.lease import ServerLease
from core.types import (
    CancelDisposition,
    RolloutErrorCategory,
    RolloutResultResponse,
    RolloutStatus,
)
from server_stub.log_safety import server_logger
from server_stub.workflow import RolloutProgress

logger = server_logger(__name__)

# A backend's answer to cancel_rollouts that the server takes as final for that id.
_BACKEND_DISPOSITIONS = frozenset(CancelDisposition)

#: Told each status the server gives one rollout, once each, in order: `queued` once its task
#: exists, then what the backend reports, then the terminal status (PROTOCOL.md §8).
StatusObserver: TypeAlias = Callable[[RolloutStatus], None]


class UnknownRollout(KeyError):
    """No entry under that id: never admitted, or removed after retention (404)."""


class InvalidLease(PermissionError):
    """The lease token does not match (403)."""


class RolloutEntry:
    """One admitted rollout, from registration until retention removes it."""

    __slots__ = (
        "disposition",
        "lease",
        "observer",
        "progress",
        "result",
        "result_json",
        "rollout_id",
        "task",
        "waiters",
    )

    def __init__(
        self,
        rollout_id: str,
        lease_length_sec: float,
        *,
        on_expire: Callable[[], None],
        on_status: Callable[[RolloutStatus], None],
        observer: StatusObserver | None = None,
    ) -> None:
        self.rollout_id = rollout_id
        self.lease = ServerLease(lease_length_sec, on_expire)
        self.progress = RolloutProgress(on_status=on_status)
        self.observer = observer
        self.result: RolloutResultResponse | None = None
        # The terminal body, encoded once: finished rollouts are polled again and again.
        self.result_json = b""
        self.task: asyncio.Task[None] | None = None
        self.disposition: str | None = None
        self.waiters: list[asyncio.Future[None]] = []

    @property
    def status(self) -> RolloutStatus:
        return self.progress.status


def lease_failure(rollout_id: str) -> RolloutResultResponse:
    return RolloutResultResponse(
        rollout_id=rollout_id,
        status=RolloutStatus.FAILURE,
        err_message="polling lease expired",
        err_category=RolloutErrorCategory.LEASE_EXPIRED,
    )


class RolloutRegistry:
    def __init__(
        self,
        *,
        result_wait_timeout_sec: float,
        polling_lease_timeout_sec: float,
        result_retention_sec: float,
        backend_cancel: Callable[[str], str | None],
        encode_result: Callable[[RolloutResultResponse], bytes],
    ) -> None:
        self.result_wait_timeout_sec = result_wait_timeout_sec
        self.polling_lease_timeout_sec = polling_lease_timeout_sec
        self.result_retention_sec = result_retention_sec
        self._backend_cancel = backend_cancel
        self._encode_result = encode_result
        self.entries: dict[str, RolloutEntry] = {}
        self._timers: set[asyncio.TimerHandle] = set()
        #: Rollout tasks not yet finished (queued, executing, saving or publishing).
        self.active = 0

    # -- admission ---------------------------------------------------------------------------

    def register(
        self, rollout_id: str, observer: StatusObserver | None = None
    ) -> tuple[RolloutEntry, str]:
        """Add an entry with a fresh lease; the caller has checked for duplicates."""
        entry = RolloutEntry(
            rollout_id,
            self.polling_lease_timeout_sec,
            on_expire=lambda: self._expire(entry),
            on_status=lambda status: self._status_changed(entry, status),
            observer=observer,
        )
        token = entry.lease.issue_token()
        entry.lease.arm()
        self.entries[rollout_id] = entry
        return entry, token

    def discard(self, entry: RolloutEntry) -> None:
        """Undo a registration whose execution could not be scheduled."""
        entry.lease.stop()
        if self.entries.get(entry.rollout_id) is entry:
            del self.entries[entry.rollout_id]

    def bind(self, entry: RolloutEntry, task: asyncio.Task[None]) -> None:
        """Attach the execution task; from now on the rollout is `queued` for its observer."""
        entry.task = task
        self.active += 1
        task.add_done_callback(lambda done: self._task_done(entry, done))
        _tell(entry, RolloutStatus.QUEUED)

    # -- results -----------------------------------------------------------------------------

    def publish(self, entry: RolloutEntry, response: RolloutResultResponse) -> bool:
        """Set the terminal result once; a lease that expired first wins (PROTOCOL.md §4.2)."""
        if entry.result is not None:
            return False
        if entry.lease.expired():
            self._finish(entry, lease_failure(entry.rollout_id))
            self.cancel_execution(entry)
            return False
        self._finish(entry, response)
        return True

    def _finish(self, entry: RolloutEntry, response: RolloutResultResponse) -> None:
        entry.result = response
        entry.result_json = self._encode_result(response)
        entry.progress.status = response.status
        entry.lease.stop()
        self._wake(entry)
        _tell(entry, response.status)
        self._after(self.result_retention_sec, lambda: self._remove_when_idle(entry))

    def _expire(self, entry: RolloutEntry) -> None:
        if entry.result is None and entry.lease.expired():
            self._finish(entry, lease_failure(entry.rollout_id))
            self.cancel_execution(entry)

    def _task_done(self, entry: RolloutEntry, task: asyncio.Task[None]) -> None:
        self.active -= 1
        if entry.result is not None:
            return
        if task.cancelled():
            # Cancelled before its first step: the task never ran our own handler.
            self._finish(
                entry,
                RolloutResultResponse(rollout_id=entry.rollout_id, status=RolloutStatus.CANCELLED),
            )
        else:
            if task.exception() is not None:
                logger.error("rollout task %s crashed", entry.rollout_id, exc_info=task.exception())
            self._finish(
                entry,
                RolloutResultResponse(
                    rollout_id=entry.rollout_id,
                    status=RolloutStatus.FAILURE,
                    err_message="rollout task crashed",
                    err_category=RolloutErrorCategory.INTERNAL_ERROR,
                ),
            )

    # -- polling -----------------------------------------------------------------------------

    def lookup(self, rollout_id: str) -> RolloutEntry:
        entry = self.entries.get(rollout_id)
        if entry is None:
            raise UnknownRollout(rollout_id)
        return entry

    def renew(self, entry: RolloutEntry, token: str, arrived: float) -> None:
        """Authenticate a poll and renew an unfinished rollout's lease from its arrival."""
        if not entry.lease.authenticate(token):
            raise InvalidLease(entry.rollout_id)
        if entry.result is None:
            if entry.lease.expired(arrived):
                self._expire(entry)
            else:
                entry.lease.renew(arrived)

    async def wait_for_change(self, entry: RolloutEntry) -> None:
        """Return when the status differs from now, or after the long-poll hold time."""
        if entry.result is not None:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        entry.waiters.append(waiter)
        timer = loop.call_later(self.result_wait_timeout_sec, _settle, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if waiter in entry.waiters:  # the request went away before any change
                entry.waiters.remove(waiter)

    def _status_changed(self, entry: RolloutEntry, status: RolloutStatus) -> None:
        self._wake(entry)
        _tell(entry, status)

    def _wake(self, entry: RolloutEntry) -> None:
        waiters, entry.waiters = entry.waiters, []
        for waiter in waiters:
            _settle(waiter)

    # -- cancellation ------------------------------------------------------------------------

    def select(self, ids: Iterable[str] | None, prefix: str | None, all_: bool) -> list[str]:
        if all_:
            return list(self.entries)
        if prefix is not None:
            return [rid for rid in self.entries if rid.startswith(prefix)]
        return list(dict.fromkeys(ids or ()))

    def cancel(self, rollout_ids: Iterable[str]) -> dict[str, str]:
        dispositions: dict[str, str] = {}
        for rollout_id in rollout_ids:
            entry = self.entries.get(rollout_id)
            if entry is None or entry.result is not None:
                dispositions[rollout_id] = CancelDisposition.NOT_FOUND.value
            else:
                dispositions[rollout_id] = self.cancel_execution(entry)
        return dispositions

    def cancel_execution(self, entry: RolloutEntry) -> str:
        """Stop one rollout's work; repeat calls return the first call's disposition."""
        if entry.disposition is not None:
            return entry.disposition
        entry.disposition = (
            CancelDisposition.CANCELLED_QUEUED.value
            if entry.status == RolloutStatus.QUEUED
            else CancelDisposition.CANCELLED_RUNNING.value
        )
        try:
            answer = self._backend_cancel(entry.rollout_id)
        except Exception:
            logger.exception("backend could not cancel rollout %s", entry.rollout_id)
            answer = None
        if answer in _BACKEND_DISPOSITIONS:
            entry.disposition = str(answer)
            return entry.disposition
        task = entry.task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
        return entry.disposition

    # -- retention and shutdown ---------------------------------------------------------------

    def _remove_when_idle(self, entry: RolloutEntry) -> None:
        # The id stays reserved until its execution task has unwound as well.
        if entry.task is not None and not entry.task.done():
            entry.task.add_done_callback(lambda _t: self._remove(entry))
        else:
            self._remove(entry)

    def _remove(self, entry: RolloutEntry) -> None:
        if self.entries.get(entry.rollout_id) is entry:
            del self.entries[entry.rollout_id]

    def _after(self, delay: float, callback: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.discard(handle)
            callback()

        handle = loop.call_later(delay, fire)
        self._timers.add(handle)

    def active_tasks(self) -> list[asyncio.Task[None]]:
        return [e.task for e in self.entries.values() if e.task is not None and not e.task.done()]

    def close(self) -> None:
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        for entry in self.entries.values():
            entry.lease.stop()
            self._wake(entry)


def _tell(entry: RolloutEntry, status: RolloutStatus) -> None:
    if entry.observer is None:
        return
    try:
        entry.observer(status)
    except Exception:
        # What the server publishes besides the API must never change the rollout itself.
        logger.exception("status observer of rollout %s failed", entry.rollout_id)


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
