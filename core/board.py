"""`RolloutBoard`: every rollout a run knows about, what was observed of it, and what was asked.

The board is the one place a front end reads (DESIGN.md §1): handles report each observed
status change to it, the eval runner registers rollouts and admission failures, and the
dashboard or the headless reporter consume *change batches* (the ids changed since their last
look) at their own pace, so a burst of hundreds of changes costs one repaint, not hundreds.
`take_changes` is the batches of the run's own front end; every other consumer (a dashboard
attached to the run from another process) has a `ChangeFeed` of its own (`subscribe`), so
that none of them takes the changes another has not seen yet. No Textual here.

Servers that publish ownership events (PROTOCOL.md §8.1) report each status themselves: the
eval hands them to `server_mark`, and the board merges them with what the polls observed
into each record's marks (see `core.rollout_record`), the server's time winning. An event
comes once per status; a repeated or late one changes nothing it should not.

The model gateway is a source of phase truth too, for servers that publish nothing (an
official server holds each poll until the next change, so without its events no poll sees
`running`): a workflow calls the model only while its rollout runs, so a rollout's first
model call proves `running` from the call's start. `_model_proves_running` is that rule, the
one place it is applied: a mark with the source `model`, which the server's own report
replaces and an earlier poll's keeps its place before. The phase track, stuck detection, the
details and a replay (which plays the calls back) all read it from the marks.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from core.errors import describe_error
from core.handle import RolloutHandle, Transition
from core.model_activity import ModelActivity, ModelCallReport
from core.phases import PHASES, PhaseMark
from core.reported_by import ReportedBy
from core.rollout_record import (
    Canceller,
    CancelRequest,
    RecordedRollout,
    RequestOptions,
    RolloutRecord,
)
from core.running_median import RunningMedian
from core.spill_file import SpillFile
from core.types import (
    PHASE_ORDER,
    TERMINAL_STATUSES,
    RolloutResultResponse,
    RolloutStatus,
    failure_category,
)

_RUNNING = RolloutStatus.RUNNING
_UP_TO_RUNNING = frozenset({RolloutStatus.QUEUED, _RUNNING})

if TYPE_CHECKING:
    from core.client import RolloutClient

# Stuck threshold when no --stuck-after is given: this many times the median finished duration
# of the same phase, and never less than the floor.
STUCK_MEDIAN_FACTOR = 3.0
STUCK_FLOOR_SEC = 30.0
# Server events of rollouts not on the board yet (the event may beat the admission answer, or
# belong to another client of a shared server): kept for this many rollouts, oldest dropped,
# and per rollout the first of each status only (a repeat is no news: the board would ignore
# it), so one id flooded with events holds as little as any other.
MAX_EARLY_EVENT_ROLLOUTS = 4096
#: The failures-by-category of a rollout that failed by its server's word alone (a watch's):
#: the category is in its result, which the events do not carry.
UNKNOWN_CATEGORY = "category unknown"


def _reporting_server(record: RolloutRecord, default: str | None) -> str | None:
    """The `server_id` of the first server report a rollout got; `default` before any."""
    return next(
        (mark.server_id for mark in record.marks.values() if mark.source == "server"), default
    )


@dataclass(frozen=True)
class ChangeBatch:
    """Ids whose records changed since the previous batch, and the batch's number."""

    ids: frozenset[str]
    version: int
    added: tuple[str, ...]


class ChangeFeed:
    """One consumer's change batches: what changed since it last took one, whatever the
    board's other consumers took meanwhile."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        # `known`: ids its first batch has as changed and added (what came before it).
        self._added: list[str] = list(known)
        self._changed: set[str] = set(self._added)
        self._version = 0

    def note_change(self, rollout_id: str) -> None:
        self._changed.add(rollout_id)

    def add(self, rollout_id: str) -> None:
        self._added.append(rollout_id)

    def take(self) -> ChangeBatch:
        """The ids changed since the last call (possibly none); the next batch starts empty."""
        changed, self._changed = self._changed, set()
        added, self._added = tuple(self._added), []
        self._version += 1
        return ChangeBatch(frozenset(changed), self._version, added)


#: Called with a record and each status observation it gets, from a poll or the server, once
#: per status and source, in the order they come in.
TransitionHook = Callable[[RolloutRecord, PhaseMark], None]
#: Called with a record and its cancel when one is asked for, and again once the server has
#: answered it (its `disposition` or `error` is then set).
CancelHook = Callable[[RolloutRecord, CancelRequest], None]
#: Called with a record when the board stops tracking it (`stop_tracking`).
UntrackHook = Callable[[RolloutRecord], None]
#: Called with the record of a rollout its server never admitted (`record_not_admitted`).
NotAdmittedHook = Callable[[RolloutRecord], None]


class RolloutBoard:
    """The run's rollouts by id, in the order they were first seen."""

    def __init__(
        self,
        *,
        stuck_after_sec: float | None = None,
        redact: Callable[[str], str] | None = None,
        on_transition: TransitionHook | None = None,
        on_cancel: CancelHook | None = None,
        on_untrack: UntrackHook | None = None,
        on_not_admitted: NotAdmittedHook | None = None,
    ) -> None:
        """`redact` masks secrets in the error texts the board keeps (a server's err_message
        may quote the LLM key), so no front end can show or export them. `on_transition` is
        called for every status a record observes, in order, `on_cancel` when a cancel is
        asked for and when it is answered, `on_untrack` when tracking stops, and
        `on_not_admitted` for a rollout its server never admitted: the run's
        transitions.jsonl is written from them."""
        self.started_at = time.monotonic()
        self._redact = redact
        self._on_transition = on_transition
        self._on_cancel = on_cancel
        self._on_untrack = on_untrack
        self._on_not_admitted = on_not_admitted
        self.records: dict[str, RolloutRecord] = {}
        #: Where finished rollouts' results are kept instead of memory, once a run sets it
        #: (its run folder's; `core.spill_file`). None: in memory, packed.
        self.spill: SpillFile | None = None
        self.stuck_after_sec = stuck_after_sec
        # `take_changes`'s, made by its first call: a headless run never takes changes, and a
        # feed nobody takes from would hold every id of the run. The others are `subscribe`'s.
        self._changes: ChangeFeed | None = None
        self._feeds: list[ChangeFeed] = []
        # Finished durations per phase: their median is what a stuck rollout is measured by.
        self._durations = {status: RunningMedian() for status in PHASES}
        # Per record, how many of its transitions, which status (for the phase indexes) and
        # which display status the indexes below account for: a record reads its handle,
        # which moves on before telling the board.
        self._accounted: dict[str, int] = {}
        self._phase_of: dict[str, RolloutStatus] = {}
        self._counted_as: dict[str, str | None] = {}
        self._early_events: dict[str, dict[RolloutStatus, PhaseMark]] = {}
        # Kept up to date as records change, so that a repaint never walks every record:
        # counts per display status, failures per category, and, per phase, the in-flight
        # rollouts in the order they entered it (oldest first: the stuck ones lead).
        self._status_counts: Counter[str] = Counter()
        self._failures: Counter[str] = Counter()
        self._failure_counted: set[str] = set()
        self._untracked = 0
        self._in_phase: dict[RolloutStatus, dict[str, float]] = {
            phase: {} for phase in self._durations
        }
        #: Over every rollout's model calls: Σ total_tokens, and Σ cost while any is known.
        self.total_tokens = 0
        self.total_cost_usd: float | None = None
        self.model_calls = 0
        # Calls of rollouts not on the board yet: a workflow may call the model before the
        # server's admission answer has reached us.
        self._early_activity: dict[str, ModelActivity] = {}

    # -- registering -----------------------------------------------------------------------

    def track(
        self,
        handle: RolloutHandle,
        *,
        client: RolloutClient | None = None,
        options: RequestOptions | None = None,
        row_index: int | None = None,
        run_index: int | None = None,
        source_row_index: int | None = None,
        server: str = "",
        submitted_at: float | None = None,
    ) -> RolloutRecord:
        """Follow a handle: its transitions so far, and from now on each change it observes.

        The handle must have been made with `on_change=board.handle_changed`: that is how the
        board hears of its changes."""
        if handle.on_change != self.handle_changed:
            raise ValueError(
                f"rollout {handle.rollout_id}: its handle reports to someone else "
                "(create it with on_change=board.handle_changed)"
            )
        record = RolloutRecord(
            rollout_id=handle.rollout_id,
            row_index=row_index,
            run_index=run_index,
            source_row_index=source_row_index,
            request=options,
            server=server,
            submitted_at=handle.transitions[0].at if submitted_at is None else submitted_at,
            observed=handle,
            client=client,
            redact=self._redact,
        )
        self._add(record)
        return record

    def record_not_admitted(
        self,
        rollout_id: str,
        error: BaseException | str,
        *,
        options: RequestOptions | None = None,
        row_index: int | None = None,
        run_index: int | None = None,
        source_row_index: int | None = None,
        server: str = "",
        submitted_at: float | None = None,
    ) -> RolloutRecord:
        """A rollout the server never accepted (protocol error, admission deadline, refused),
        sent at `submitted_at` (default: now)."""
        record = RolloutRecord(
            rollout_id=rollout_id,
            row_index=row_index,
            run_index=run_index,
            source_row_index=source_row_index,
            request=options,
            server=server,
            submitted_at=time.monotonic() if submitted_at is None else submitted_at,
            observed=RecordedRollout(grade=options.grade if options is not None else None),
            admission_error=self._clean(error if isinstance(error, str) else describe_error(error)),
            redact=self._redact,
        )
        self._add(record)
        if self._on_not_admitted is not None:
            self._on_not_admitted(record)
        return record

    def observe(
        self,
        rollout_id: str,
        status: RolloutStatus,
        at: float,
        *,
        row_index: int | None = None,
        run_index: int | None = None,
        source_row_index: int | None = None,
        grade: bool | None = None,
        result: RolloutResultResponse | None = None,
        phases_recorded: bool = True,
    ) -> RolloutRecord:
        """A status seen by someone else (a replayed recording): no handle, no actions.

        Its rows, `grade` (whether grading was asked for) and `phases_recorded` (see
        `RolloutRecord`) are taken when the rollout is first seen."""
        record = self.records.get(rollout_id)
        known = record is not None
        if record is None:
            record = RolloutRecord(
                rollout_id=rollout_id,
                row_index=row_index,
                run_index=run_index,
                source_row_index=source_row_index,
                request=None,
                server="",
                submitted_at=at,
                observed=RecordedRollout(grade=grade),
                redact=self._redact,
                phases_recorded=phases_recorded,
            )
        recording = record.observed
        if not isinstance(recording, RecordedRollout):
            raise ValueError(f"rollout {rollout_id} is followed through its handle")
        if not recording.transitions or recording.status != status:
            recording.seen(Transition(status, at))
        if result is not None:
            recording.latest_result = result
        if known:
            self._account(record)
        else:
            self._add(record)
        return record

    def _add(self, record: RolloutRecord) -> None:
        early = self._early_activity.pop(record.rollout_id, None)
        if early is not None:
            record.model = early
        self.records[record.rollout_id] = record
        for feed in self._feeds:
            feed.add(record.rollout_id)
        self._account(record)
        for mark in self._early_events.pop(record.rollout_id, {}).values():
            self.server_mark(record.rollout_id, mark)
        self._model_proves_running(record)

    # -- server events ---------------------------------------------------------------------

    def server_mark(self, rollout_id: str, mark: PhaseMark) -> None:
        """A status the server reported giving a rollout (`mark.source == "server"`).

        The first report of each status counts; a repeat (an exporter's retry, a replayed
        batch) changes nothing. For a rollout not on the board yet it is kept until it is.
        A rollout is one server's: once a server has reported it, a report from another
        `server_id` (any local process can post events) is refused, never recorded."""
        record = self.records.get(rollout_id)
        if record is None:
            early = self._early_events.get(rollout_id)
            if early is None:
                if len(self._early_events) >= MAX_EARLY_EVENT_ROLLOUTS:
                    del self._early_events[next(iter(self._early_events))]
                early = self._early_events[rollout_id] = {}
            early.setdefault(mark.status, mark)
            return
        known = record.marks.get(mark.status)
        if known is not None and known.source == "server":
            return
        if mark.server_id != _reporting_server(record, mark.server_id):
            return
        if known is not None:  # a poll or a model call first: the server's time is exact
            mark = replace(mark, polled_at=known.poll_time)
        record.marks[mark.status] = mark
        if self._on_transition is not None:
            self._on_transition(record, mark)
        self._account(record)

    def server_report(
        self,
        rollout_id: str,
        mark: PhaseMark,
        reported_by: ReportedBy,
        *,
        canceller: Canceller | None = None,
    ) -> RolloutRecord:
        """A status a server reported of a rollout nobody here sent (`osmosis-tui watch`).

        Its first report puts the rollout on the board, known from then on only by its
        server's reports (`RolloutRecord.reported_by`), cancelled through `canceller`; each
        report is then merged as `server_mark` merges one (a repeat, or a report from another
        `server_id`, changes nothing)."""
        record = self.records.get(rollout_id)
        if record is None:
            record = RolloutRecord(
                rollout_id=rollout_id,
                row_index=None,
                run_index=None,
                request=None,
                server=reported_by.server_id,
                submitted_at=mark.at,
                client=canceller,
                redact=self._redact,
                reported_by=reported_by,
            )
            self._add(record)
        self.server_mark(rollout_id, mark)
        return record

    # -- model calls (the gateway's hooks) -------------------------------------------------

    def call_started(self, call: ModelCallReport) -> None:
        """A rollout's model call began: it shows as in flight until `call_ended`, and the
        rollout as running from its first call's start (`_model_proves_running`)."""
        self._activity(call.rollout_id).started(call)
        self.model_calls += 1
        record = self.records.get(call.rollout_id)
        if record is not None:
            self._model_proves_running(record)
        self._mark_known(call.rollout_id)

    def call_ended(self, call: ModelCallReport) -> None:
        """A rollout's model call ended (answered, failed or abandoned)."""
        self._activity(call.rollout_id).ended(call)
        if call.total_tokens is not None:
            self.total_tokens += call.total_tokens
        if call.cost_usd is not None:
            self.total_cost_usd = (self.total_cost_usd or 0.0) + call.cost_usd
        self._mark_known(call.rollout_id)

    def use_model_activity(self, rollout_id: str, activity: ModelActivity) -> None:
        """`activity` as the rollout's model calls (a copy of another process's board, as
        that board reports them): what it proves of `running` is applied as a call's is."""
        record = self.records.get(rollout_id)
        if record is None:
            return
        record.model = activity
        self._model_proves_running(record)
        self._note_change(rollout_id)

    def _model_proves_running(self, record: RolloutRecord) -> None:
        """The rule "a model call proves running", applied to `record`: its first model call
        through the gateway began at `first_started_at`, so it was running by then.

        The mark (source `model`) is set unless something says better: the server's own
        report, or a poll that saw `running` earlier. A call that began after a later phase
        was known to have begun (a grader calling the model) proves nothing of `running`'s
        start, nor does a call of a rollout the server never admitted."""
        started = record.model.first_started_at
        if started is None or record.admission_error is not None:
            return
        known = record.marks.get(_RUNNING)
        if known is not None and (known.source == "server" or known.at <= started):
            return
        if any(
            status not in _UP_TO_RUNNING and mark.at <= started
            for status, mark in record.marks.items()
        ):
            return
        # A poll saw it later (the official server holds each poll until the next change).
        polled_at = None if known is None else known.poll_time
        record.marks[_RUNNING] = PhaseMark(_RUNNING, started, "model", polled_at=polled_at)
        self._account(record)

    def result_tokens(self, rollout_id: str, tokens: int) -> None:
        """The tokens a rollout's result says it used, for a run whose model calls nobody
        recorded (an official run folder): counted as its calls' would have been."""
        activity = self._activity(rollout_id)
        activity.tokens = (activity.tokens or 0) + tokens
        self.total_tokens += tokens
        self._mark_known(rollout_id)

    def _activity(self, rollout_id: str) -> ModelActivity:
        record = self.records.get(rollout_id)
        if record is not None:
            return record.model
        return self._early_activity.setdefault(rollout_id, ModelActivity())

    def _mark_known(self, rollout_id: str) -> None:
        # A rollout not on the board yet is marked when it is added.
        if rollout_id in self.records:
            self._note_change(rollout_id)

    # -- observing -------------------------------------------------------------------------

    def handle_changed(self, handle: RolloutHandle) -> None:
        """A tracked handle's `on_change`: account for what it observed."""
        record = self.records.get(handle.rollout_id)
        if record is not None and record.observed is handle:
            self._account(record)

    def _clean(self, text: str) -> str:
        return text if self._redact is None else self._redact(text)

    def _account(self, record: RolloutRecord) -> None:
        """Bring the board's indexes up to what `record` has observed since the last call:
        its marks, phase durations, who is in which phase, the counts, the transition hooks."""
        rollout_id = record.rollout_id
        transitions = record.transitions
        for index in range(self._accounted.get(rollout_id, 0), len(transitions)):
            self._polled(record, transitions[index])
        self._accounted[rollout_id] = len(transitions)
        if record.status != self._phase_of.get(rollout_id):
            self._entered(record)
        else:
            # A better source moved the current phase's start (the server's report after a
            # poll's): stuck detection reads it from here. Its place in the order is kept.
            entered = self._in_phase.get(record.status)
            if entered is not None and rollout_id in entered:
                entered[rollout_id] = record.phase_started_at
        # An untracked rollout that has not ended is counted as `untracked`, not under the
        # status it was last seen in: nobody watches it go on.
        status = None if record.untracked and not record.finished else record.display_status
        counted = self._counted_as.get(rollout_id)
        if status != counted:
            if counted is not None:
                self._status_counts[counted] -= 1
            if status is not None:
                self._status_counts[status] += 1
            self._counted_as[rollout_id] = status
        self._count_failure(record)
        self._note_change(rollout_id)
        if record.finished and isinstance(record.observed, RolloutHandle):
            # Its handle has nothing more to observe: what it saw is kept, its polling state
            # is let go, so that a long run's finished rollouts cost what they show, no more.
            record.observed = RecordedRollout.of(record.observed, self.spill)
            if self.spill is not None:
                record.model.spill_to(self.spill)
                record.spill_request(self.spill)
            record.marks.pack()

    def _polled(self, record: RolloutRecord, transition: Transition) -> None:
        """A status a poll observed: a mark of its own unless the server reported it."""
        mark = PhaseMark(transition.status, transition.at, "poll")
        known = record.marks.get(transition.status)
        if known is None or (known.source == "model" and transition.at < known.at):
            # A poll that saw `running` before the first model call began is the better bound.
            record.marks[transition.status] = mark
        elif known.polled_at is None:
            record.marks[transition.status] = replace(known, polled_at=transition.at)
        if self._on_transition is not None:
            self._on_transition(record, mark)

    def _entered(self, record: RolloutRecord) -> None:
        """`record` is in a new status: the phase it left lasted until this one began."""
        rollout_id = record.rollout_id
        status = record.status
        entered = record.phase_started_at
        left = self._phase_of.get(rollout_id)
        self._phase_of[rollout_id] = status
        left_at = record.marks.at(left) if left is not None else None
        durations = self._durations.get(left) if left is not None else None
        if left_at is not None and durations is not None and entered >= left_at:
            durations.add(entered - left_at)
        self._leave_phase(record)
        # Entered in (nearly) time order: a server's report may come up to an export
        # interval late, which moves a stuck flag by as much, never more.
        if record.in_flight and status in self._in_phase:
            self._in_phase[status][rollout_id] = entered
        if status in TERMINAL_STATUSES:
            for cancel in record.cancels:
                cancel.answered_at = cancel.answered_at or entered

    def _leave_phase(self, record: RolloutRecord) -> None:
        # Every phase is looked in: the record's own status may already be the next one.
        for entered in self._in_phase.values():
            entered.pop(record.rollout_id, None)

    def _count_failure(self, record: RolloutRecord) -> None:
        """Once per finished failure: its category, for the summary's failures-by-category."""
        if record.rollout_id in self._failure_counted:
            return
        category = failure_category_of(record)
        if category is None:
            return
        self._failure_counted.add(record.rollout_id)
        self._failures[category] += 1

    def failures_by_category(self) -> Counter[str]:
        return Counter(self._failures)

    def _note_change(self, rollout_id: str) -> None:
        for feed in self._feeds:
            feed.note_change(rollout_id)

    def touch(self, rollout_id: str) -> None:
        """Put a record in the next change batches for what was set on it from outside the
        board's methods (a copy of another process's board sets its cancels, its model calls
        and its poll counts as that board reports them)."""
        if rollout_id in self.records:
            self._note_change(rollout_id)

    # -- change batches --------------------------------------------------------------------

    def take_changes(self) -> ChangeBatch:
        """The ids changed since the last call (possibly none); the next batch starts empty.
        The first call's batch has every record, as changed and as added."""
        if self._changes is None:
            self._changes = ChangeFeed(self.records)
            self._feeds.append(self._changes)
        return self._changes.take()

    def subscribe(self) -> ChangeFeed:
        """A feed of change batches of its own for one more consumer, from now on: what it
        takes, `take_changes` still gets, and the other way round. `unsubscribe` ends it."""
        feed = ChangeFeed()
        self._feeds.append(feed)
        return feed

    def unsubscribe(self, feed: ChangeFeed) -> None:
        """Stop feeding `feed` (a consumer gone); one not subscribed is ignored."""
        if feed is not self._changes and feed in self._feeds:
            self._feeds.remove(feed)

    # -- actions ---------------------------------------------------------------------------

    def can_cancel(self, record: RolloutRecord) -> bool:
        """Whether its server can still be asked to cancel it: not over as far as we know, and
        sent from here (a client to ask). Untracked ones too: they still run on their server.
        The rollouts `cancel_on_server` sends a request for, and the dashboard offers to."""
        return not record.finished and record.client is not None

    async def cancel_on_server(self, ids: Iterable[str]) -> dict[str, str]:
        """Ask each rollout's server to cancel it; returns a disposition or an error per id.

        Finished, not-admitted and unknown ids are skipped, and an id named again is asked for
        once. The terminal `cancelled` arrives later through polling (an untracked rollout's
        we will not see).
        """
        targets = [
            r
            for r in map(self.records.get, dict.fromkeys(ids))
            if r is not None and self.can_cancel(r)
        ]
        answers = await asyncio.gather(*(self._cancel_one(r) for r in targets))
        return dict(zip((r.rollout_id for r in targets), answers, strict=True))

    async def _cancel_one(self, record: RolloutRecord) -> str:
        assert record.client is not None
        request = CancelRequest(requested_at=time.monotonic())
        record.cancels += (request,)
        self._note_change(record.rollout_id)
        if self._on_cancel is not None:
            self._on_cancel(record, request)
        try:
            response = await record.client.cancel_rollout(record.rollout_id)
        except Exception as exc:  # a cancel that failed is shown, never raised into the UI
            request.error = self._clean(describe_error(exc))
            answer = f"error: {request.error}"
        else:
            request.disposition = response.dispositions.get(record.rollout_id, "not_found")
            answer = request.disposition
        if record.finished:
            request.answered_at = request.answered_at or time.monotonic()
        self._note_change(record.rollout_id)
        if self._on_cancel is not None:
            self._on_cancel(record, request)
        return answer

    def observe_cancel(self, rollout_id: str, cancel: CancelRequest) -> None:
        """A cancel someone else asked for (a replayed recording): added to the rollout's
        cancel history once; when its answer is filled in later, call this again so that it
        shows. A rollout not on the board is passed over."""
        record = self.records.get(rollout_id)
        if record is None:
            return
        if not any(known is cancel for known in record.cancels):
            record.cancels += (cancel,)
        self._note_change(rollout_id)

    def stop_tracking(self, ids: Iterable[str], *, at: float | None = None) -> list[str]:
        """Stop polling these rollouts locally, at `at` (default: now; a replay's moment);
        nothing is sent to the server."""
        stopped = []
        at = time.monotonic() if at is None else at
        for record in map(self.records.get, ids):
            if record is None or record.finished or record.untracked:
                continue
            self._leave_phase(record)
            record.untracked = True
            record.untracked_at = at
            self._untracked += 1
            if record.handle is not None:
                record.handle.cancel()
            stopped.append(record.rollout_id)
            self._account(record)
            if self._on_untrack is not None:
                self._on_untrack(record)
        return stopped

    # -- queries ---------------------------------------------------------------------------

    def __iter__(self) -> Iterator[RolloutRecord]:
        return iter(self.records.values())

    def __len__(self) -> int:
        return len(self.records)

    def stuck_threshold(self, phase: RolloutStatus) -> float:
        if self.stuck_after_sec is not None:
            return self.stuck_after_sec
        durations = self._durations.get(phase)
        median = (durations.median() if durations is not None else None) or 0.0
        return max(STUCK_FLOOR_SEC, STUCK_MEDIAN_FACTOR * median)

    def is_stuck(self, record: RolloutRecord, now: float | None = None) -> bool:
        # The status read once for all three questions: the flags column asks this of every
        # row it sorts.
        status = record.in_flight_status
        if status is None or status not in PHASE_ORDER:
            return False
        now = time.monotonic() if now is None else now
        return now - record.entered_at(status) > self.stuck_threshold(status)

    def stuck_ids(self, now: float | None = None) -> list[str]:
        """In-flight rollouts stuck in their phase; only the stuck ones are looked at."""
        now = time.monotonic() if now is None else now
        stuck = []
        for phase, entered in self._in_phase.items():
            cutoff = now - self.stuck_threshold(phase)
            for rollout_id, at in entered.items():
                if at >= cutoff:
                    break  # entered in order: everyone after this one is younger
                stuck.append(rollout_id)
        return stuck

    def counts(self, now: float | None = None) -> Counter[str]:
        """Rollouts per display status (those untracked before they ended aside), plus
        `stuck`, `untracked` and `total`."""
        counts = +self._status_counts  # a copy without the zero entries
        counts["untracked"] = self._untracked
        counts["stuck"] = len(self.stuck_ids(now))
        counts["total"] = len(self.records)
        return counts

    def select(
        self,
        *,
        text: str | None = None,
        statuses: frozenset[str] | None = None,
        stuck_only: bool = False,
        now: float | None = None,
    ) -> list[RolloutRecord]:
        """Records passing every given filter, in board order."""
        now = time.monotonic() if now is None else now
        return [
            record
            for record in self.records.values()
            if (statuses is None or record.display_status in statuses)
            and (not stuck_only or self.is_stuck(record, now))
            and (not text or record.matches(text))
        ]


#: The failures-by-category name of a rollout its server never admitted.
NOT_ADMITTED_CATEGORY = "not admitted"


def failure_category_of(record: RolloutRecord) -> str | None:
    """The failures-by-category name of `record` when it ended a failure (its server never
    admitted it, its result is a failure, or, for a rollout nobody here sent, its server
    reported a failure whose result is its caller's), else None."""
    if record.admission_error is not None:
        return NOT_ADMITTED_CATEGORY
    if record.status != RolloutStatus.FAILURE:
        return None
    result = record.result_head
    if result is not None:
        return failure_category(result.err_category)
    return UNKNOWN_CATEGORY if record.reported_by is not None else None
