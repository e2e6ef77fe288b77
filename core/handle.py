"""`RolloutHandle`: one admitted rollout, long-polled in the background (PROTOCOL.md §6.2, §6.3).

The official members keep their names and behaviour. Our additions, for the dashboard: the
observed `transitions` with their times, `skipped_phases()`, polling counters, the client-side
`lease`, and an `on_change` callback. The handle is on the hot path of every rollout, so the
per-poll work is kept small: URL, headers and timeout are built once, bodies are parsed straight
from bytes, and retry bookkeeping only exists once something failed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
import httpx

from core.errors import RolloutProtocolError, describe_error
from core.lease import Lease
from core.phases import SkipReason, skipped_phases
from core.result_head import ResultHead
from core.transport import Exchange
from core.types import (
    OBSERVED_STATUS_HEADER,
    PHASE_ORDER,
    POLLING_LEASE_HEADER,
    RECEIVED,
    TERMINAL_STATUSES,
    RolloutInitResponse,
    RolloutResultResponse,
    RolloutStatus,
)
from core.wire import Prepared

if TYPE_CHECKING:
    from core.client import RolloutClient

logger = logging.getLogger(__name__)

# Each GET may be held by the server for result_wait_timeout_sec; this is the allowance on top.
RESULT_READ_GRACE_SEC = 10.0
# Retry schedules, one counter each per GET cycle (read at call time, so tests can shrink them).
TRANSPORT_RETRY_DELAYS_SEC: tuple[float, ...] = (0.1, 0.5)
GATEWAY_RETRY_DELAYS_SEC: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)

# A load balancer answers these itself when the server reset or never answered; result reads
# are idempotent, so they are worth a longer schedule than transport errors.
_GATEWAY_STATUSES = frozenset({502, 503, 504})
# A server that answers a poll at once with the status it already had (it does not hold the
# long poll) would be polled back to back, as fast as the network allows. Such polls are
# spaced: the next starts QUICK_POLL_PAUSE_SEC after the last one did, a pause that grows by
# QUICK_POLL_GROWTH for each such poll in a row, up to QUICK_POLL_PAUSE_MAX_SEC. A poll that
# brings a new status, or that the server held that long, resets it; a new status is polled
# again at once. (Read at call time, so tests can change them.)
QUICK_POLL_PAUSE_SEC = 0.05
QUICK_POLL_GROWTH = 1.5
QUICK_POLL_PAUSE_MAX_SEC = 0.5
# The request may not have reached the server, or its answer was lost: safe to ask again.
# ConnectTimeout/WriteTimeout/PoolTimeout are deliberately absent (the official client gives up).
_RETRYABLE_TRANSPORT_ERRORS = (httpx.RemoteProtocolError, httpx.NetworkError, httpx.ReadTimeout)

_RUNNING_ORDER = PHASE_ORDER[RolloutStatus.RUNNING]
_GRADING_ORDER = PHASE_ORDER[RolloutStatus.GRADING]


class Transition(NamedTuple):
    """A status the handle observed, and when (`time.monotonic()`)."""

    status: RolloutStatus
    at: float


class RolloutHandle:
    """An admitted rollout: awaitable for its terminal result, observable while it runs.

    Construct it inside a running event loop (`RolloutClient.run_rollout_async` does): the
    polling task starts at once. `lease_deadline` is on the `time.monotonic()` clock and
    defaults to now + the admission's lease length.

    Additions over the official handle:

    - `grade`: whether the request asked for grading (explains a missing `grading` phase);
    - `transitions`: the admission status, then each observed change of status;
    - `skipped_phases()`: why queued/running/grading were not observed;
    - `polls` (successful GETs), `poll_retries` (retried failures), `last_poll_error`
      (description of the failure being retried or that ended polling; cleared by the next
      successful poll), `lease` (the client's view of the polling lease);
    - `on_change(handle)`: called synchronously after each observed change of status and once
      when polling ends, however it ends. Exceptions from it are logged, never raised. It is
      given at construction (`run_rollout_async(..., on_change=...)`) and cannot be replaced;
    - `observe_every_status` (default True): each poll tells our server the status it last
      saw, so a change that happened between two polls is answered at once and every status
      is observed, at the cost of one more request per status the rollout reaches before the
      handle polls. False polls as the official client does (each poll waits for the next
      change, so a quick phase may go unseen): for callers that learn every status from the
      server another way, as the eval does from ownership events (EVAL.md §6).
    """

    def __init__(
        self,
        client: RolloutClient,
        admission: RolloutInitResponse,
        *,
        lease_deadline: float | None = None,
        grade: bool = True,
        on_change: Callable[[RolloutHandle], None] | None = None,
        observe_every_status: bool = True,
    ) -> None:
        # Fails outside a running loop before any coroutine exists (no "never awaited" noise).
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        self.rollout_id: str = admission.rollout_id
        self.status: RolloutStatus = admission.status
        self.latest_result: RolloutResultResponse | None = None
        self.status_changed: asyncio.Condition = asyncio.Condition()
        self.polling_finished: bool = False
        self.grade: bool = grade
        self._on_change = on_change
        self.transitions: list[Transition] = [Transition(admission.status, now)]
        self.polls: int = 0
        self.poll_retries: int = 0
        self.last_poll_error: str | None = None
        self.lease: Lease = Lease(admission.polling_lease_timeout_sec, start=now)
        if lease_deadline is not None:
            self.lease.deadline = lease_deadline

        self._wire = client.wire
        self._url = f"{client.url}/rollout/{admission.rollout_id}/result"
        self._base_headers = {
            **client.auth_headers,
            POLLING_LEASE_HEADER: admission.polling_lease_token,
        }
        # One prepared request per status seen: each poll says which status it last observed
        # (OBSERVED_STATUS_HEADER), so our server answers at once when that is stale. Without
        # `observe_every_status` no poll says it, and every poll waits for the next change,
        # as the official client's do.
        self._observe_every_status = observe_every_status
        self._requests: dict[RolloutStatus, Prepared] = {}
        self._timeout_sec = admission.result_wait_timeout_sec + RESULT_READ_GRACE_SEC
        self._timeout = httpx.Timeout(self._timeout_sec)
        self._end_notified = False
        self._notifier: asyncio.Task[None] | None = None

        self.result_task: asyncio.Task[RolloutResultResponse] = loop.create_task(self._poll())
        self.result_task.add_done_callback(self._polling_ended)

    # -- official surface ------------------------------------------------------------------

    def __await__(self) -> Generator[Any, None, RolloutResultResponse]:
        return self.result_task.__await__()

    def __repr__(self) -> str:
        return f"<RolloutHandle {self.rollout_id!r} {self.status.value}>"

    def cancel(self) -> bool:
        """Stop polling locally; nothing is sent, and the server rollout runs until its lease
        expires. Awaiting the handle afterwards raises `asyncio.CancelledError`."""
        return self.result_task.cancel()

    def done(self) -> bool:
        return self.result_task.done()

    async def wait_for_completion(self) -> RolloutResultResponse:
        return await self.result_task

    async def wait_for_running(self) -> RolloutStatus:
        """Wait until `running` or later (or any terminal status); returns the status seen."""
        return await self._wait_for_phase(_RUNNING_ORDER)

    async def wait_for_grading(self) -> RolloutStatus:
        """Wait until `grading` or later; a terminal status when grading never came."""
        return await self._wait_for_phase(_GRADING_ORDER)

    # -- additions ---------------------------------------------------------------------------

    @property
    def on_change(self) -> Callable[[RolloutHandle], None] | None:
        return self._on_change

    def skipped_phases(self) -> dict[RolloutStatus, SkipReason]:
        """Phases among queued/running/grading that were not observed, with the reason."""
        return skipped_phases(
            (transition.status for transition in self.transitions),
            self.status,
            grade=self.grade,
            result=None if self.latest_result is None else ResultHead.of(self.latest_result),
        )

    # -- waiting -----------------------------------------------------------------------------

    def _reached(self, order: int) -> bool:
        status = self.status
        return status in TERMINAL_STATUSES or PHASE_ORDER.get(status, -1) >= order

    async def _wait_for_phase(self, order: int) -> RolloutStatus:
        if self._reached(order):
            return self.status
        condition = self.status_changed
        async with condition:
            await condition.wait_for(lambda: self._reached(order) or self.polling_finished)
            current = self.status
        if self._reached(order):
            return current
        # Polling ended short of the phase: only an error or a local cancel does that.
        return (await self.result_task).status

    # -- polling -----------------------------------------------------------------------------

    async def _poll(self) -> RolloutResultResponse:
        condition = self.status_changed
        pause = QUICK_POLL_PAUSE_SEC
        try:
            while True:
                started = time.monotonic()
                result = await self._read_result()
                self.latest_result = result
                self.polls += 1
                self.last_poll_error = None
                status = result.status
                changed = status is not self.status
                if changed:
                    self.status = status
                    self.transitions.append(Transition(status, time.monotonic()))
                async with condition:
                    condition.notify_all()
                if changed and self._on_change is not None:
                    self._notify_change()
                if status in TERMINAL_STATUSES:
                    return result
                # The server's long-poll paces this loop; one that does not hold it is
                # paced by the pause (see QUICK_POLL_PAUSE_SEC).
                waited = time.monotonic() - started
                if changed or waited >= pause:
                    pause = QUICK_POLL_PAUSE_SEC
                    continue
                await asyncio.sleep(pause - waited)
                pause = min(pause * QUICK_POLL_GROWTH, QUICK_POLL_PAUSE_MAX_SEC)
        except Exception as exc:
            self.last_poll_error = describe_error(exc)
            raise
        finally:
            self.polling_finished = True
            async with condition:
                condition.notify_all()
            self._end_notified = True

    def _polling_ended(self, task: asyncio.Task[RolloutResultResponse]) -> None:
        if not self._end_notified:
            # Cancelled before its first step, the coroutine never ran its `finally` (or was
            # cancelled again inside it): wake the waiters from here instead. The official
            # handle leaves them hanging in that case.
            self.polling_finished = True
            self._notifier = task.get_loop().create_task(self._notify_waiters())
        if self._on_change is not None:
            self._notify_change()

    async def _notify_waiters(self) -> None:
        async with self.status_changed:
            self.status_changed.notify_all()

    def _notify_change(self) -> None:
        assert self._on_change is not None
        try:
            self._on_change(self)
        except Exception:
            # A display callback must never break polling.
            logger.exception("on_change callback failed for rollout %s", self.rollout_id)

    async def _read_result(self) -> RolloutResultResponse:
        """One GET cycle: a result, or the error that retries (if any) could not get past."""
        lease = self.lease
        timeout_sec = self._timeout_sec
        transport_retries = 0
        gateway_retries = 0
        while True:
            started = time.monotonic()
            try:
                response = await self._get()
            except _RETRYABLE_TRANSPORT_ERRORS as exc:
                error: Exception = exc
                schedule = TRANSPORT_RETRY_DELAYS_SEC
                delay = schedule[transport_retries] if transport_retries < len(schedule) else None
                transport_retries += 1
            else:
                status = response.status
                if status == 200:
                    result = self._parse(response)
                    # Renewal is only certain from when the request left, not when it came back.
                    lease.renew(started)
                    return result
                error = RolloutProtocolError(
                    f"GET /rollout/{self.rollout_id}/result returned {status}", status_code=status
                )
                if status not in _GATEWAY_STATUSES:
                    raise error
                schedule = GATEWAY_RETRY_DELAYS_SEC
                delay = schedule[gateway_retries] if gateway_retries < len(schedule) else None
                gateway_retries += 1
            # A retry is only worth it if its whole request fits in what is left of the lease;
            # past the deadline the server has failed the rollout anyway.
            if delay is None or not lease.fits(delay + timeout_sec):
                raise error
            self.poll_retries += 1
            self.last_poll_error = describe_error(error)
            logger.warning(
                "Retrying result read for rollout %s after %s (attempt %d) in %.2fs",
                self.rollout_id,
                self.last_poll_error,
                transport_retries + gateway_retries,
                delay,
            )
            await asyncio.sleep(delay)
            if not lease.fits(timeout_sec):
                raise error

    def _poll_request(self) -> Prepared:
        # Keyed by the status it reports (always the admission's when it reports none).
        seen = self.status if self._observe_every_status else RolloutStatus.QUEUED
        request = self._requests.get(seen)
        if request is None:
            headers = dict(self._base_headers)
            if self._observe_every_status:
                headers[OBSERVED_STATUS_HEADER] = seen.value
            request = self._requests[seen] = self._wire.prepare(self._url, headers, self._timeout)
        return request

    async def _get(self) -> Exchange:
        """Send the GET, bounded as a whole by the per-request timeout.

        httpx's timeouts bound each socket read, so a body that drips in a byte at a time
        would never time out; this wall-clock bound turns it into a `ReadTimeout`, retried like
        any other. (A retry starts only when this whole bound fits in the lease, so no attempt
        can outlive the lease either.)
        """
        with anyio.move_on_after(self._timeout_sec):
            return await self._wire.send("GET", self._poll_request())
        raise httpx.ReadTimeout(
            f"no complete answer within {self._timeout_sec:g} s",
            request=httpx.Request("GET", self._url),
        )

    def _parse(self, response: Exchange) -> RolloutResultResponse:
        try:
            result = RolloutResultResponse.model_validate_json(response.content, context=RECEIVED)
        except ValueError as exc:
            raise RolloutProtocolError(
                f"GET /rollout/{self.rollout_id}/result returned an invalid response",
                status_code=response.status,
            ) from exc
        if result.rollout_id != self.rollout_id:
            raise RolloutProtocolError(
                f"GET /rollout/{self.rollout_id}/result returned a different rollout_id",
                status_code=response.status,
            )
        return result


__all__ = ["RolloutHandle", "SkipReason", "Transition"]
