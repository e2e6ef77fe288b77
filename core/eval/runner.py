"""The eval runner: a pool of workers sends work items to rollout servers (EVAL.md §7).

Each finished item is journaled before anything else happens to it, so an interrupted or
killed run loses nothing that finished. Problems that concern the whole run stop dispatching
and leave the rest pending for a resume.

While it runs, a front end can steer it (DESIGN.md §2): pause and resume dispatch and change
max-in-flight (the `DispatchGate`: one worker per rollout in flight, as many as the limit),
and requeue a work item whose rollout is in flight: that rollout is cancelled on its server
and its outcome, whatever it turns out to be, is never journaled; the item goes back to the
front of the queue under a new id, and that attempt is journaled as the item's result. A
hedge (core/eval/hedging.py) is the same without the cancel: the two attempts race and
`_claim` keeps one outcome per item.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import httpx

from core.board import RolloutBoard
from core.errors import RolloutAdmissionTimeoutError, RolloutProtocolError, describe_error
from core.eval.dispatch_gate import DispatchGate
from core.eval.errors import EvalError
from core.eval.hedging import HedgeAfter, HedgeBook
from core.eval.outcomes import INVALID_REWARD, classify, failed_item, invalid_reward, item_status
from core.eval.plan.dataset import DatasetRow
from core.eval.results.records import ItemKey, ItemResult, WorkItem
from core.eval.safe_text import quote_text
from core.eval.servers.pool import AllServersDown, RolloutServerSlot, ServerPool
from core.handle import RolloutHandle
from core.result_head import ResultHead
from core.rollout_record import RequestOptions, RolloutRecord
from core.running_median import RunningMedian
from core.types import RolloutResultResponse

logger = logging.getLogger(__name__)

# Without both phase timeouts an item may take this long before the runner gives up on it.
DEFAULT_ITEM_DEADLINE_SEC = 3600.0
ITEM_DEADLINE_MARGIN_SEC = 60.0
# How long an interrupt waits for cancelled rollouts to report their end.
SETTLE_AFTER_CANCEL_SEC = 30.0
# A work item whose server restarted or went away under it is sent again at most this often.
MAX_REQUEUES = 2
# A rollout in flight this many times longer than the median finished item took is overdue:
# when it ends cannot be foreseen (the factor of the board's stuck rule).
OVERDUE_FACTOR = 3.0

RunStatus = Literal["complete", "incomplete", "interrupted"]


@dataclass(frozen=True)
class RunSettings:
    chat_completions_url: Callable[[str], str]
    """A rollout's `chat_completions_url`, by its id: each has its own route in the gateway."""
    llm_api_key: str | None = field(default=None, repr=False)
    concurrency: int = 1
    #: The most work items in flight the process has file descriptors for (None: no bound);
    #: a max-in-flight raised while the run goes on stays below it too.
    descriptor_ceiling: int | None = None
    agent_timeout_sec: float | None = None
    grader_timeout_sec: float | None = None

    @property
    def item_deadline_sec(self) -> float:
        if self.agent_timeout_sec is None or self.grader_timeout_sec is None:
            return DEFAULT_ITEM_DEADLINE_SEC
        return self.agent_timeout_sec + self.grader_timeout_sec + ITEM_DEADLINE_MARGIN_SEC


@dataclass
class RunOutcome:
    status: RunStatus
    problem: str | None = None
    finished: int = 0


class _RunProblem(Exception):
    """Something that concerns the whole run: stop dispatching, keep what finished."""


class ControlRefused(EvalError, RuntimeError):
    """A front end's control cannot act now: the rollout is no work item's attempt in flight,
    or the run is ending."""


class EvalRunner:
    """Runs work items through a server pool, reporting every rollout to a board."""

    def __init__(
        self,
        *,
        items: Sequence[WorkItem],
        rows: dict[int, DatasetRow],
        pool: ServerPool,
        board: RolloutBoard,
        settings: RunSettings,
        on_result: Callable[[ItemResult], None],
    ) -> None:
        self.pending: deque[WorkItem] = deque(items)
        self.rows = rows
        self.pool = pool
        self.board = board
        self.settings = settings
        self.on_result = on_result
        self.problem: str | None = None
        self.interrupted = False
        self._cancel_in_flight = True
        self.finished = 0
        #: Work items whose rollout was admitted and has not ended yet: when each was sent,
        #: by rollout id.
        self.in_flight: dict[str, float] = {}
        # How long each finished item took (s): their median says what is overdue.
        self._durations = RunningMedian()
        self._requeues: dict[tuple[int, int], int] = {}
        self._stop_dispatch = asyncio.Event()
        #: The pause and max-in-flight the workers follow.
        self.gate = DispatchGate(settings.concurrency, ceiling=settings.descriptor_ceiling)
        #: Work items being run now (from their dispatch to their outcome).
        self.running_items = 0
        #: Rollouts sent by hand (`submit`) so far.
        self.manual_sent = 0
        self._workers: set[asyncio.Task[None]] = set()
        self._live_workers = 0  # counted at once: a retiring worker is still a task for a while
        self._worker_numbers = itertools.count()
        # While `run` runs: workers can be started (a raised limit, a requeue).
        self._running = False
        # Each work item's attempt in flight (or left to its lease, untracked) whose outcome is
        # still the item's, by rollout id; a requeue takes it out.
        self._attempts: dict[str, WorkItem] = {}
        # The same, by item: the ids of its attempts (two for a hedged item), so that an
        # attempt's rivals are found without a walk over every rollout in flight.
        self._attempt_ids: dict[ItemKey, set[str]] = {}
        # The id a requeued item is sent under next (already recorded as the requeue's).
        self._next_ids: dict[ItemKey, str] = {}
        # Requeued attempts being cancelled.
        self._endings: set[asyncio.Task[None]] = set()
        #: Hedges and rule requeues (core/eval/hedging.py).
        self.hedges = HedgeBook()

    @property
    def dispatching(self) -> bool:
        return not self._stop_dispatch.is_set()

    def stop_dispatch(self, problem: str | None = None) -> None:
        if problem is not None and self.problem is None:
            self.problem = problem
            logger.error("stopping the run: %s", problem)
        self._stop_dispatch.set()
        self.gate.notify()  # paused workers leave too

    async def interrupt(self, *, cancel_in_flight: bool) -> None:
        """Stop dispatching; cancel what is in flight on the servers (waiting a bounded time
        for it to end), or leave it to its lease. Either way it stays pending."""
        self.interrupted = True
        self._cancel_in_flight = cancel_in_flight
        self.stop_dispatch()
        await self._wind_down(
            [record for record in self.board if record.in_flight], cancel=cancel_in_flight
        )

    async def _wind_down(self, records: list[RolloutRecord], *, cancel: bool) -> None:
        ids = [record.rollout_id for record in records]
        if cancel:
            await self.board.cancel_on_server(ids)
            ends = [r.handle.result_task for r in records if r.handle is not None]
            if ends:
                await asyncio.wait(ends, timeout=SETTLE_AFTER_CANCEL_SEC)
        # Whatever did not end (a server that ignores cancels) is no longer waited for.
        self.board.stop_tracking(ids)

    def _end_in_background(self, records: list[RolloutRecord]) -> None:
        """Cancel these attempts like an interrupt cancels (a bounded wait for their end, then
        untracked), without waiting here; the run waits for it before it ends."""
        if not records:
            return
        ending = asyncio.ensure_future(self._wind_down(records, cancel=True))
        self._endings.add(ending)
        ending.add_done_callback(self._endings.discard)

    # -- steering (the dashboard's keys) ---------------------------------------------------

    def pause_dispatch(self) -> None:
        """Send no new work item until `resume_dispatch`; those in flight go on."""
        self.gate.pause()

    def resume_dispatch(self) -> None:
        self.gate.resume()

    def set_max_in_flight(self, limit: int) -> int:
        """Run up to `limit` work items at once (within the servers' advertised capacity, at
        least 1); returns the limit set. Lowering it cancels nothing."""
        limit = self.gate.set_limit(limit, self.pool.advertised_capacity())
        self._start_workers()
        return limit

    def requeue(self, rollout_id: str) -> str:
        """Run the work item of rollout `rollout_id` (in flight, or untracked and left to its
        lease) again, under a new id, which is returned: the rollout is cancelled on its
        server, and its outcome is not the item's any more. The item goes to the front of the
        queue and is sent as dispatch and the limit allow. `ControlRefused` when the rollout
        is no such attempt (finished, sent by hand, requeued already) or the run is ending."""
        if not self._running or not self.dispatching:
            raise ControlRefused("the run is ending: no work item is sent again")
        item = self._attempts.get(rollout_id)
        record = self.board.records.get(rollout_id)
        if item is None or record is None or record.finished:
            # The id is the asker's own text (a viewer's, over the control socket): escaped,
            # so that one holding a line break cannot write lines of its own into a log.
            raise ControlRefused(
                f"rollout {quote_text(rollout_id)} is no work item's attempt in flight"
            )
        self._drop_attempt(rollout_id)
        new_id = uuid.uuid4().hex
        self._next_ids[item.key] = new_id
        self.pending.appendleft(item)
        record.requeued_as = new_id
        self._end_in_background([record])
        self._start_workers()
        return new_id

    def hedge(self, rollout_id: str) -> str:
        """Run the work item of rollout `rollout_id` (in flight) a second time under a new id,
        which is returned, while the first attempt goes on: a requeue that cancels nothing.
        The first of the two to finish is the item's result (`_claim`). `ControlRefused` when
        the rollout is no work item's attempt in flight, the item had its hedge, or the run is
        ending."""
        if not self._running or not self.dispatching:
            raise ControlRefused("the run is ending: no work item is sent again")
        item = self._attempts.get(rollout_id)
        record = self.board.records.get(rollout_id)
        if item is None or record is None or record.finished or item.key in self.hedges.hedged:
            raise ControlRefused(
                f"rollout {quote_text(rollout_id)} is no unhedged work item's attempt in flight"
            )
        new_id = uuid.uuid4().hex
        self._next_ids[item.key] = new_id
        self.pending.appendleft(item)
        book = self.hedges
        book.hedged.add(item.key)
        book.hedge_of[new_id] = rollout_id
        book.avoid[item.key] = record.server
        book.sent += 1
        self._start_workers()
        return new_id

    def due_for_hedge(self, hedge_after: HedgeAfter, now: float) -> list[str]:
        """The attempts in flight longer than `hedge_after` says, whose item had no hedge."""
        limit = hedge_after.threshold(self._durations.median())
        if limit is None:
            return []
        return [
            rid
            for rid, sent in self.in_flight.items()
            if now - sent > limit
            and rid in self._attempts
            and self._attempts[rid].key not in self.hedges.hedged
        ]

    def items_in_flight(self) -> int:
        """Work items with a rollout in flight: a hedged item's two attempts count once."""
        attempts = self._attempts
        return len({attempts[rid].key if rid in attempts else rid for rid in self.in_flight})

    def items_waiting(self) -> int:
        """Work items not sent yet: the queue less the hedges in it (their item is sent)."""
        hedges = self.hedges.hedged.intersection(self._next_ids) - self.hedges.settled
        return len(self.pending) - len(hedges)

    def attempt_key(self, rollout_id: str) -> ItemKey | None:
        """The work item whose outcome rollout `rollout_id` still is, if any."""
        item = self._attempts.get(rollout_id)
        return None if item is None else item.key

    # -- running ---------------------------------------------------------------------------

    async def run(self) -> RunOutcome:
        watcher = asyncio.create_task(self.pool.watch())
        self._running = True
        try:
            self._start_workers()
            # Workers come and go (a raised or lowered limit): wait until none is left.
            while self._workers:
                done, _ = await asyncio.wait(self._workers, return_when=asyncio.FIRST_EXCEPTION)
                self._workers -= done
                for task in done:
                    task.result()  # a worker that failed ends the run, as it always has
            self._running = False
            if self._endings:
                await asyncio.wait(self._endings)
        finally:
            self._running = False
            for ending in self._endings:
                ending.cancel()
            watcher.cancel()
            self.pool.stop()
        if self.interrupted:
            status: RunStatus = "interrupted"
        elif self.problem is not None or self.pending:
            status = "incomplete"
        else:
            status = "complete"
        return RunOutcome(status=status, problem=self.problem, finished=self.finished)

    def _start_workers(self) -> None:
        """Workers up to the limit, no more than there are items waiting (as official: a
        worker more would never send anything): when the run starts, and when the limit is
        raised or an item requeued while it runs."""
        if not self._running:
            return
        for _ in range(min(self.gate.limit - self._live_workers, len(self.pending))):
            self._live_workers += 1
            number = next(self._worker_numbers)
            self._workers.add(asyncio.create_task(self._worker(), name=f"eval-worker-{number}"))

    async def _worker(self) -> None:
        try:
            while self.dispatching and self.pending:
                if self._live_workers > self.gate.limit:
                    return  # the limit was lowered: one worker fewer
                if self.gate.paused:
                    await self.gate.next_change()
                    continue
                try:
                    slot = await self._acquire(self._avoid_next())
                except AllServersDown as exc:
                    self.stop_dispatch(str(exc))
                    return
                if slot is None:
                    return
                if self.gate.paused or self._live_workers > self.gate.limit or not self.pending:
                    self.pool.release(slot)  # paused or lowered while waiting for a server
                    continue
                item = self.pending.popleft()
                slot = self._away_from_first(item, slot)
                self.running_items += 1
                try:
                    await self._run_item(item, slot)
                except _RunProblem as exc:
                    self.stop_dispatch(str(exc))
                finally:
                    self.running_items -= 1
                    self.pool.release(slot)
        finally:
            self._live_workers -= 1

    def _away_from_first(self, item: WorkItem, slot: RolloutServerSlot) -> RolloutServerSlot:
        """`slot`, or, when `item` is a hedge and `slot` is its first attempt's server, another
        server with room: the queue may have changed while the worker waited for `slot`."""
        avoid = self.hedges.avoid.get(item.key) if item.key in self._next_ids else None
        if avoid is None or slot.url != avoid:
            return slot
        other = self.pool.other_with_room(avoid)
        if other is None:
            return slot
        self.pool.release(slot)
        return other

    def _avoid_next(self) -> str | None:
        """The server the next item should not go to: its first attempt's, if it is a hedge."""
        if not self.pending:
            return None
        key = self.pending[0].key
        return self.hedges.avoid.get(key) if key in self._next_ids else None

    async def _acquire(self, avoid: str | None = None) -> RolloutServerSlot | None:
        """A server slot (one other than `avoid` when another has room), or None once
        dispatching stopped while waiting for one."""
        acquire = asyncio.ensure_future(self.pool.acquire(avoid=avoid))
        stopped = asyncio.ensure_future(self._stop_dispatch.wait())
        await asyncio.wait({acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if acquire.done():
            slot = acquire.result()
            if self.dispatching:
                return slot
            self.pool.release(slot)
            return None
        acquire.cancel()
        return None

    async def _run_item(self, item: WorkItem, slot: RolloutServerSlot) -> None:
        row = self.rows[item.row_index]
        settings = self.settings
        rollout_id = self._next_ids.pop(item.key, None) or uuid.uuid4().hex
        options = RequestOptions(
            initial_messages=tuple(row.initial_messages()),
            chat_completions_url=settings.chat_completions_url(rollout_id),
            label=row.label,
            metadata=row.metadata,
            grade=row.grade,
            agent_timeout_sec=settings.agent_timeout_sec,
            grader_timeout_sec=settings.grader_timeout_sec,
        )
        started = time.monotonic()
        # Which incarnation of the server the rollout is sent to: a restart noticed later (by
        # the health watcher or another worker) still means this rollout was lost with it.
        generation = slot.restarts
        try:
            record = await self._send(
                slot,
                rollout_id,
                options,
                started=started,
                row_index=item.row_index,
                run_index=item.run_index,
                source_row_index=item.source_row_index,
                extra_fields={"row_index": item.row_index, "run_index": item.run_index},
            )
        except RolloutProtocolError as exc:
            self._not_admitted(item, rollout_id, exc, options, slot)
            if self._hedge_moot(item):
                return
            if 400 <= exc.status_code < 500:
                self._finish(item, rollout_id, None, started, error_type="rollout_protocol_error")
                return
            if exc.status_code == 503 and await self._began_draining(slot):
                self.pending.appendleft(item)  # to wait, like the others, for one that accepts
                return
            raise _RunProblem(f"admission failed on {slot.url}: {exc}") from exc
        except (RolloutAdmissionTimeoutError, httpx.HTTPError, OSError) as exc:
            self._not_admitted(item, rollout_id, exc, options, slot)
            if self._hedge_moot(item):
                return
            if await self._server_lost(slot, item, generation):
                return
            raise _RunProblem(f"admission failed on {slot.url}: {describe_error(exc)}") from exc
        if item.key in self.hedges.settled:  # the first attempt won while this was admitted
            await self._wind_down([record], cancel=True)
            return
        first = self.hedges.hedge_of.get(rollout_id)
        if first is not None:  # each attempt of a hedged item names the other
            record.hedged_with = first
            first_record = self.board.records.get(first)
            if first_record is not None:
                first_record.hedged_with = rollout_id
        self.in_flight[rollout_id] = started
        self._attempts[rollout_id] = item
        self._attempt_ids.setdefault(item.key, set()).add(rollout_id)
        # Taken now: once the rollout ends (the wind-down below may end it), the board lets
        # the record's handle go, and its result is still this item's to read.
        handle = record.handle
        assert handle is not None
        try:
            if self.interrupted:  # admitted while the interrupt was winding the others down
                await self._wind_down([record], cancel=self._cancel_in_flight)
            await self._await_result(
                item, record, handle, slot, started=started, generation=generation
            )
        finally:
            del self.in_flight[rollout_id]

    def overdue(self, now: float) -> list[str]:
        """The rollouts in flight for longer than `OVERDUE_FACTOR` times the median time a
        finished item took (none before an item finished)."""
        median = self._durations.median()
        if median is None:
            return []
        limit = OVERDUE_FACTOR * median
        return [rid for rid, sent in self.in_flight.items() if now - sent > limit]

    async def submit(
        self,
        options: RequestOptions,
        *,
        row_index: int | None = None,
        source_row_index: int | None = None,
    ) -> str:
        """Send a rollout outside the work items (the dashboard's new rollout and re-run),
        the way the workers send theirs: to a free server, to the run's model, tracked on the
        board, marked `manual`. It is never journaled. Returns its id; an admission failure
        is raised."""
        slot = await self.pool.acquire()
        rollout_id = uuid.uuid4().hex
        options = replace(
            options, chat_completions_url=self.settings.chat_completions_url(rollout_id)
        )
        try:
            record = await self._send(
                slot,
                rollout_id,
                options,
                started=time.monotonic(),
                row_index=row_index,
                source_row_index=source_row_index,
            )
        except BaseException:
            self.pool.release(slot)
            raise
        record.manual = True
        self.manual_sent += 1
        assert record.handle is not None
        record.handle.result_task.add_done_callback(lambda _task: self.pool.release(slot))
        return record.rollout_id

    async def _send(
        self,
        slot: RolloutServerSlot,
        rollout_id: str,
        options: RequestOptions,
        *,
        started: float,
        row_index: int | None,
        run_index: int | None = None,
        source_row_index: int | None = None,
        extra_fields: dict[str, Any] | None = None,
    ) -> RolloutRecord:
        """The one way a rollout leaves the runner: admitted by `slot`'s server with the run's
        key (passed, never kept), then followed on the board."""
        handle = await slot.client.run_rollout_async(
            list(options.initial_messages),
            options.chat_completions_url,
            rollout_id,
            llm_api_key=self.settings.llm_api_key,
            label=options.label,
            metadata=options.metadata,
            grade=options.grade,
            agent_timeout_sec=options.agent_timeout_sec,
            grader_timeout_sec=options.grader_timeout_sec,
            extra_fields=extra_fields,
            on_change=self.board.handle_changed,
            # A server whose events reach us tells every status itself: its polls need not
            # ask for each one (one request less per rollout that a poll would have caught).
            observe_every_status=not slot.publishes_events,
        )
        if slot.first_admitted_at is None:  # its events are due from now (EventSilence)
            slot.first_admitted_at = time.monotonic()
        return self.board.track(
            handle,
            client=slot.client,
            options=options,
            row_index=row_index,
            run_index=run_index,
            source_row_index=source_row_index,
            server=slot.url,
            submitted_at=started,
        )

    def _not_admitted(
        self,
        item: WorkItem,
        rollout_id: str,
        error: BaseException,
        options: RequestOptions,
        slot: RolloutServerSlot,
    ) -> None:
        self.board.record_not_admitted(
            rollout_id,
            error,
            options=options,
            row_index=item.row_index,
            run_index=item.run_index,
            source_row_index=item.source_row_index,
            server=slot.url,
        )

    async def _await_result(
        self,
        item: WorkItem,
        record: RolloutRecord,
        handle: RolloutHandle,
        slot: RolloutServerSlot,
        *,
        started: float,
        generation: int,
    ) -> None:
        try:
            # Shielded: the deadline must not cancel the handle before we cancel on the server.
            result = await asyncio.wait_for(
                asyncio.shield(handle.result_task), self.settings.item_deadline_sec
            )
        except asyncio.CancelledError:
            if handle.result_task.cancelled():
                # Stopped tracking locally: the item stays pending (and can still be requeued).
                return
            raise
        except asyncio.TimeoutError:  # not the builtin TimeoutError on Python 3.10
            if not self._claim(record, no_result=True):
                return
            await self.board.cancel_on_server([record.rollout_id])
            self.board.stop_tracking([record.rollout_id])  # no longer watched: not "running"
            self._finish(
                item, record.rollout_id, None, started, error_type="item_deadline_exceeded"
            )
            return
        except (RolloutProtocolError, httpx.HTTPError, OSError) as exc:
            if not self._claim(record, no_result=True):
                return
            reward = invalid_reward(exc) if isinstance(exc, RolloutProtocolError) else None
            if reward is not None:  # this item's result, not the server, is at fault
                logger.warning(
                    "rollout %s (source row %s, run %s) on %s: its result has reward %s, "
                    "not a finite number; the item fails as %s",
                    record.rollout_id,
                    item.source_row_index,
                    item.run_index,
                    slot.url,
                    reward,
                    INVALID_REWARD,
                )
                self._finish(item, record.rollout_id, None, started, error_type=INVALID_REWARD)
                return
            # Polling gave up: nobody watches this rollout any more, whatever happens next
            # (its item may be sent again under a new id). It must not stay "running".
            self.board.stop_tracking([record.rollout_id])
            if await self._server_lost(slot, item, generation):
                return
            raise _RunProblem(
                f"polling rollout {record.rollout_id} on {slot.url} failed: {describe_error(exc)}"
            ) from exc
        journaled = item_status(ResultHead.of(result))
        # Cancelled: no result of its own (its item stays pending, or is the other attempt's).
        if self._claim(record, no_result=journaled is None):
            self._finish(item, record.rollout_id, result, started)

    def _hedge_moot(self, item: WorkItem) -> bool:
        """Whether an attempt of hedged `item` that was not admitted is of no account: the
        other attempt runs on, or won already (only that one then decides the item)."""
        if item.key not in self.hedges.hedged:
            return False
        return item.key in self.hedges.settled or item.key in self._attempt_ids

    def _drop_attempt(self, rollout_id: str) -> None:
        """Rollout `rollout_id`'s outcome is no longer its item's."""
        item = self._attempts.pop(rollout_id)
        ids = self._attempt_ids[item.key]
        ids.discard(rollout_id)
        if not ids:
            del self._attempt_ids[item.key]

    def _claim(self, record: RolloutRecord, *, no_result: bool = False) -> bool:
        """Take the attempt's outcome as its item's; False when the item was requeued
        meanwhile (it runs again under another id: this outcome is nobody's).

        A hedged item has two attempts: the first to finish with a result of its own (a
        success or a failure) is claimed, and the other attempt is cancelled on its server (or
        taken off the queue, not yet sent); one that ends without a result of its own
        (`no_result`: cancelled, its polling lost, its deadline passed) is dropped while the
        other may still finish. All of this happens without an await, so two attempts ending
        together cannot both claim."""
        item = self._attempts.get(record.rollout_id)
        if item is None:
            return False
        rivals = sorted(self._attempt_ids[item.key] - {record.rollout_id})
        queued = item.key in self._next_ids and item.key in self.hedges.hedged
        self._drop_attempt(record.rollout_id)
        if no_result and (rivals or queued):
            # Not the item's: cancelled if it still runs (a deadline), and no longer followed.
            self._end_in_background([record])
            return False
        if queued:  # the hedge was not sent yet: it never will be
            del self._next_ids[item.key]
            self.pending.remove(item)
        for rid in rivals:
            self._drop_attempt(rid)
        self._end_in_background([self.board.records[rid] for rid in rivals])
        if item.key in self.hedges.hedged:
            self.hedges.settled.add(item.key)
            if record.rollout_id in self.hedges.hedge_of:
                self.hedges.won += 1
        return True

    async def _began_draining(self, slot: RolloutServerSlot) -> bool:
        """After a 503: whether the server now says it takes no new rollouts (its shutdown
        began after the pool chose it), which is no problem of the run."""
        await self.pool.probe(slot)
        return slot.state == "draining"

    async def _server_lost(self, slot: RolloutServerSlot, item: WorkItem, generation: int) -> bool:
        """After a failure: if the server restarted or went down since the item was sent to
        it (`generation` = its restart count then), send the item again later."""
        await self.pool.probe(slot, after_failure=True)
        if slot.state != "down" and slot.restarts == generation:
            return False
        key = (item.row_index, item.run_index)
        self._requeues[key] = self._requeues.get(key, 0) + 1
        if self._requeues[key] <= MAX_REQUEUES:
            self.pending.append(item)
        return True

    def _finish(
        self,
        item: WorkItem,
        rollout_id: str,
        result: RolloutResultResponse | None,
        started: float,
        *,
        error_type: str | None = None,
    ) -> None:
        duration_ms = (time.monotonic() - started) * 1000.0
        if result is not None:
            outcome = classify(item, rollout_id, result, duration_ms)
            if outcome is None:
                return  # cancelled: pending for a later resume
        else:
            outcome = failed_item(item, rollout_id, duration_ms, error_type)
        self.finished += 1
        self._durations.add(duration_ms / 1000.0)
        self.on_result(outcome)
