"""What a recording played up to one of its events amounts to: the board, and the run's counts.

`ReplayState` is built fresh and fed events in order (`apply`); a replay that seeks back
builds a new one and feeds it again from the start, so that the board after a seek or a
step back is the board a fresh replay has at that point. It counts progress the way the
live run counted it (`core.eval.session.EvalSession.progress`):

- a work item is done once its journaled result was seen (the last attempt's, as in the
  journal); rollouts sent by hand are no work items;
- in flight: work items whose latest attempt is in flight (not finished, still followed);
- not dispatched: the items with no attempt yet, and those requeued whose new attempt was not
  sent yet; an item whose attempt ended without a result (cancelled, untracked) is neither,
  as in the live run, where it waits for a resume;
- an invocation that ended (`SessionEnded`) no longer follows what it still had in flight, as
  a live run untracks it when it ends, whether or not its recording says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from core.board import RolloutBoard
from core.eval.dispatch_gate import DispatchState
from core.eval.results.metrics import Progress, progress
from core.eval.results.recording import (
    CancelAnswered,
    CancelAsked,
    DispatchStarted,
    DispatchSteered,
    ModelCallSeen,
    NotAdmitted,
    ReplayEvent,
    Requeued,
    ResultSeen,
    SentByHand,
    SessionEnded,
    SessionStarted,
    StatusSeen,
    Untracked,
)
from core.eval.results.records import ItemKey, ItemResult
from core.rollout_record import CancelRequest
from core.types import RolloutErrorCategory, RolloutResultResponse, RolloutSample, RolloutStatus

_CATEGORIES = {category.value: category for category in RolloutErrorCategory}


#: What the `--budget`'s control lines say happened (core.eval.cost.spend), as notes.
BUDGET_NOTES = {
    "budget_pause": "the projected spend passed the budget: dispatch paused",
    "budget_resume": "the projected spend is within the budget again",
    "budget": "budget changed",
    "budget_reached": "the spend reached the budget: the run stopped",
}


class ReplayState:
    """The board and the run's counts after the events applied so far."""

    def __init__(
        self,
        *,
        started_at: float,
        journal: Mapping[str, ItemResult],
        manual: frozenset[str],
    ) -> None:
        """`started_at`: the board's clock at the recording's time 0 (kept across seeks, so
        the app's clock never jumps); `journal`: every journaled result by rollout id;
        `manual`: the rollouts sent by hand."""
        self.board = RolloutBoard()
        self.board.started_at = started_at
        self._journal = journal
        self._manual = manual
        #: The work items' results seen so far (the last one per item).
        self.results: dict[ItemKey, ItemResult] = {}
        #: Each work item's latest attempt: the rollout seen first for it, or the id it was
        #: requeued under.
        self.attempts: dict[ItemKey, str] = {}
        #: What the live event log told of: (recording seconds, text), in order.
        self.notes: list[tuple[float, str]] = []
        self.dispatch_paused = False
        self.max_in_flight: int | None = None
        #: The hedges sent so far (--hedge-after), and the work items requeued by
        #: --requeue-stuck.
        self._hedges: list[str] = []
        #: A hedge's id → the attempt it hedged, to pair them once the hedge is on the board.
        self._hedge_of: dict[str, str] = {}
        self.requeued_by_rule = 0
        #: Rollouts sent by hand seen so far.
        self.manual_sent = 0
        self._cancels: dict[tuple[str, float], CancelRequest] = {}

    def apply(self, event: ReplayEvent) -> None:
        """Play one event (in play order) onto the board and the counts."""
        at = self.board.started_at + event.t
        if isinstance(event, StatusSeen):
            self._status(event, at)
        elif isinstance(event, ModelCallSeen):
            call = replace(
                event.call,
                started_monotonic=self.board.started_at + event.call.started_monotonic,
                ended_monotonic=(
                    None
                    if event.call.ended_monotonic is None
                    else self.board.started_at + event.call.ended_monotonic
                ),
            )
            if event.ended:
                self.board.call_ended(call)
            else:
                self.board.call_started(call)
        elif isinstance(event, CancelAsked):
            cancel = CancelRequest(requested_at=at)
            self._cancels[event.rollout_id, event.t] = cancel
            self.board.observe_cancel(event.rollout_id, cancel)
            self._note(event.t, f"cancel requested for {event.rollout_id[:10]}")
        elif isinstance(event, CancelAnswered):
            self._cancel_answered(event, at)
        elif isinstance(event, NotAdmitted):
            if event.rollout_id not in self.board.records:  # one row per rollout, as live
                self.board.record_not_admitted(
                    event.rollout_id,
                    event.error,
                    row_index=event.row_index,
                    run_index=event.run_index,
                    source_row_index=event.source_row_index,
                    server=event.server_url or "",
                    submitted_at=at,
                )
        elif isinstance(event, Untracked):
            if self.board.stop_tracking([event.rollout_id], at=at):
                self._note(
                    event.t,
                    f"stopped tracking {event.rollout_id[:10]}; "
                    "the server keeps it until its lease ends",
                )
        elif isinstance(event, ResultSeen):
            self.results[event.result.key] = event.result
        else:
            self._run_event(event)

    def _run_event(
        self,
        event: SentByHand
        | Requeued
        | DispatchSteered
        | DispatchStarted
        | SessionStarted
        | SessionEnded,
    ) -> None:
        """What was done to the run rather than seen of a rollout: said in the notes (an
        invocation that ended also stops following what it had in flight)."""
        if isinstance(event, SentByHand):
            rerun = f"re-running {event.rerun_of[:10]} as " if event.rerun_of else "submitted "
            self._note(event.t, f"{rerun}{event.rollout_id[:10]} (by hand)")
        elif isinstance(event, Requeued) and event.reason == "hedge":
            # The first attempt goes on: it stays the item's attempt the board counts.
            self._hedges.append(event.new_rollout_id)
            self._hedge_of[event.new_rollout_id] = event.rollout_id
            self._note(event.t, f"hedged {event.rollout_id[:10]} with {event.new_rollout_id[:10]}")
        elif isinstance(event, Requeued):
            if event.row_index is not None and event.run_index is not None:
                self.attempts[event.row_index, event.run_index] = event.new_rollout_id
            record = self.board.records.get(event.rollout_id)
            if record is not None:  # shown with its cancel, whose lines follow
                record.requeued_as = event.new_rollout_id
            by_rule = " (--requeue-stuck)" if event.reason == "rule" else ""
            self.requeued_by_rule += event.reason == "rule"
            self._note(
                event.t,
                f"requeued {event.rollout_id[:10]} as {event.new_rollout_id[:10]}{by_rule}",
            )
        elif isinstance(event, DispatchStarted):
            self.max_in_flight = event.max_in_flight
        elif isinstance(event, DispatchSteered):
            if event.action in ("pause", "resume"):
                self.dispatch_paused = event.action == "pause"
                self._note(event.t, f"dispatch {event.action}d")
            elif event.action == "max_in_flight" and event.value is not None:
                self.max_in_flight = event.value
                self._note(event.t, f"max in flight set to {event.value}")
            elif event.action in ("drain", "undrain") and event.server is not None:
                self._note(event.t, f"server {event.server} {event.action}ed")
            elif event.action in BUDGET_NOTES and event.value is not None:
                # The line's value is the budget in cents (core.eval.cost.spend.cents).
                said = BUDGET_NOTES[event.action]
                self._note(event.t, f"{said} (budget ${event.value / 100:.2f})")
        elif isinstance(event, SessionEnded):
            # A run that ends stops following what is still in flight; a recording of an
            # older version does not say so itself.
            left = [record.rollout_id for record in self.board if record.in_flight]
            if self.board.stop_tracking(left, at=self.board.started_at + event.t):
                self._note(
                    event.t,
                    f"invocation {event.number} ended with {len(left)} in flight, "
                    "no longer followed",
                )
        elif event.number > 1:
            self._note(event.t, f"the run resumed (invocation {event.number})")

    def _status(self, event: StatusSeen, at: float) -> None:
        rollout_id = event.rollout_id
        if event.server is not None:
            mark = replace(event.server, at=at)
            if event.reported_by is not None:
                self.board.server_report(rollout_id, mark, event.reported_by)
            else:
                self.board.server_mark(rollout_id, mark)
            return
        item = self._journal.get(rollout_id)
        terminal = event.status.is_terminal
        source_row_index = event.source_row_index
        if source_row_index is None and item is not None:
            source_row_index = item.source_row_index  # an older recording: the journal's word
        first = rollout_id not in self.board.records
        manual = rollout_id in self._manual
        if manual and first:
            self.manual_sent += 1
        self.board.observe(
            rollout_id,
            event.status,
            at,
            row_index=event.row_index,
            run_index=event.run_index,
            source_row_index=source_row_index,
            grade=event.grade,
            result=_result_of(item, event.status) if item is not None and terminal else None,
            phases_recorded=event.recorded,
        )
        # No model call of it was recorded: its tokens are its result's.
        if not event.recorded and terminal and item is not None and item.tokens:
            self.board.result_tokens(rollout_id, item.tokens)
        if first:
            record = self.board.records[rollout_id]
            hedged = self._hedge_of.get(rollout_id)
            if hedged is not None:  # each attempt of a hedged item names the other
                record.hedged_with = hedged
                other = self.board.records.get(hedged)
                if other is not None:
                    other.hedged_with = rollout_id
            if event.sent is not None:
                # Sent before it was admitted: the client's wait, as the live board had it.
                record.submitted_at = min(record.submitted_at, self.board.started_at + event.sent)
            if event.server_url is not None:
                record.server = event.server_url
        if manual:
            # Flagged from its first line (its `manual` line comes after its first statuses).
            self.board.records[rollout_id].manual = True
            return
        if event.row_index is None or event.run_index is None:
            return  # no work item's attempt (a recording of an older version)
        key = (event.row_index, event.run_index)
        if first:
            self.attempts[key] = rollout_id
        if item is not None and terminal:
            self.results[key] = item

    def _cancel_answered(self, event: CancelAnswered, at: float) -> None:
        cancel = self._cancels.get((event.rollout_id, event.asked_t))
        if cancel is None:  # a recording of an older version: only the answered line
            cancel = CancelRequest(requested_at=self.board.started_at + event.asked_t)
        cancel.disposition = event.disposition
        cancel.error = event.error
        record = self.board.records.get(event.rollout_id)
        if record is not None and record.finished:
            cancel.answered_at = cancel.answered_at or at
        self.board.observe_cancel(event.rollout_id, cancel)
        answer = event.disposition or f"failed: {event.error}"
        self._note(event.t, f"cancel {event.rollout_id[:10]}: {answer}")

    def _note(self, t: float, text: str) -> None:
        self.notes.append((t, text))

    def _sent(self) -> tuple[set[ItemKey], set[str]]:
        """The work items sent (their attempt is on the board), and the attempts in flight."""
        sent: set[ItemKey] = set()
        in_flight: set[str] = set()
        for key, rollout_id in self.attempts.items():
            record = self.board.records.get(rollout_id)
            if record is None:
                continue  # requeued: waits to be sent again
            sent.add(key)
            if record.in_flight:
                in_flight.add(rollout_id)
        return sent, in_flight

    def dispatch(self) -> DispatchState:
        """The run's dispatch as recorded: paused or not, its limit once one was set, the
        work items in flight, the rollouts sent by hand."""
        return DispatchState(
            paused=self.dispatch_paused,
            max_in_flight=self.max_in_flight,
            in_flight=len(self._sent()[1]),
            manual=self.manual_sent,
            hedges_sent=len(self._hedges),
            # A hedge won when its outcome is its item's result (seen so far).
            hedges_won=len(
                set(self._hedges).intersection(
                    result.rollout_id for result in self.results.values()
                )
            ),
            requeued_by_rule=self.requeued_by_rule,
        )

    def progress(self, now: float, *, total_items: int, pass_threshold: float) -> Progress:
        """The run's progress at `now` (the board's clock), counted as the live run did."""
        sent, in_flight = self._sent()
        accounted = sent | set(self.results)
        stuck = [rid for rid in self.board.stuck_ids(now) if rid in in_flight]
        return progress(
            self.results.values(),
            total_items=total_items,
            pass_threshold=pass_threshold,
            in_flight=len(in_flight),
            stuck=len(stuck),
            not_dispatched=max(total_items - len(accounted), 0),
        )


def _result_of(item: ItemResult, status: RolloutStatus) -> RolloutResultResponse:
    """A terminal result rebuilt from the journal: status, reward and error type, and
    whether the workflow removed the sample (a skipped item), as the live result said."""
    skipped = item.status == "skipped"
    sample = (
        RolloutSample(reward=item.reward, remove_sample=skipped)
        if item.reward is not None or skipped
        else None
    )
    category = _CATEGORIES.get(item.error_type or "")
    return RolloutResultResponse.model_construct(
        rollout_id=item.rollout_id,
        status=status,
        sample=sample,
        err_message=None if category else item.error_type,
        err_category=category,
    )
