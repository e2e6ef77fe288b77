"""Steering a running eval from its front end (DESIGN.md §2), and the record of it: pause and
resume dispatch, change max-in-flight, drain a server and undrain it, requeue a work item
(by hand, or by the --requeue-stuck rule) and hedge one (--hedge-after, core/eval/hedging.py);
also every cancel asked of a
server (and its answer), every rollout the run stops tracking and every rollout sent by hand.

The runner does what is asked (`EvalRunner.pause_dispatch` and the rest); this keeps the
record, so that the log tells what happened to the run and a replay can show it: one line in
logs.txt (step `control`, the official line format) and one in transitions.jsonl (the kinds
`control`, `cancel`, `requeue`, `untrack` and `manual`, written by the run's
`TransitionRecorder`) for each. No results file changes: events.jsonl and the snapshots stay
as official.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from core.eval.dispatch_gate import DispatchState
from core.eval.runner import ControlRefused
from core.eval.safe_text import quote_text

if TYPE_CHECKING:
    from core.eval.results.logs import RunLog
    from core.eval.results.recorder import TransitionRecorder
    from core.eval.runner import EvalRunner
    from core.rollout_record import CancelRequest, RolloutRecord

CONTROL_STEP = "control"


class RunControl:
    """The controls of one eval session. Before its runner exists only a pause can be asked
    for: it holds from the first work item on."""

    def __init__(self, recorder: TransitionRecorder) -> None:
        """`recorder` writes the run's transitions.jsonl lines (none before its folder is
        open)."""
        self._runner: EvalRunner | None = None
        self._log: RunLog | None = None
        self._recorder = recorder
        self._paused_early = False
        self._follows_capacity = False

    def record_to(self, log: RunLog) -> None:
        """The run's folder is open (the recorder writes to it already): every action from
        now on is written there (and a pause asked for before, now)."""
        self._log = log
        if self._paused_early:
            self._record_pause()

    def steer(self, runner: EvalRunner, *, follows_capacity: bool = False) -> None:
        """The runner exists: the controls act on it. `follows_capacity`: its max-in-flight
        is the servers' advertised capacity (nobody asked for another), and follows it as
        servers join and leave until someone sets it (`capacity_changed`)."""
        self._runner = runner
        self._follows_capacity = follows_capacity
        self._recorder.dispatch_started(runner.gate.limit)  # a replay shows it from the start
        if self._paused_early:
            runner.pause_dispatch()

    def state(self) -> DispatchState:
        runner = self._runner
        if runner is None:
            return DispatchState(paused=self._paused_early)
        return DispatchState(
            paused=runner.gate.paused,
            max_in_flight=runner.gate.limit,
            in_flight=runner.running_items,
            manual=runner.manual_sent,
            hedges_sent=runner.hedges.sent,
            hedges_won=runner.hedges.won,
            requeued_by_rule=runner.hedges.requeued_by_rule,
        )

    # -- the controls ----------------------------------------------------------------------

    def pause(self) -> None:
        """Send no new work item until `resume`; those in flight go on."""
        if self.state().paused:
            return
        if self._runner is None:
            self._paused_early = True
        else:
            self._runner.pause_dispatch()
        self._record_pause()

    def resume(self) -> None:
        if not self.state().paused:
            return
        self._paused_early = False
        if self._runner is not None:
            self._runner.resume_dispatch()
        self._record("dispatch resumed", action="resume")

    def set_max_in_flight(self, limit: int) -> int:
        """Run up to `limit` work items at once, within the servers' capacity (lowering it
        cancels nothing); returns the limit set. From then on it no longer follows the
        servers' capacity."""
        self._follows_capacity = False
        return self._set_limit(limit, "")

    def capacity_changed(self) -> None:
        """Servers joined or left the run: a max-in-flight that follows their capacity
        becomes the new capacity (recorded as any change of it)."""
        runner = self._runner
        if runner is None or not self._follows_capacity:
            return
        capacity = runner.pool.advertised_capacity()
        if capacity is not None:
            self._set_limit(capacity, " (the servers' capacity)")

    def _set_limit(self, limit: int, why: str) -> int:
        runner = self._steered()
        before = runner.gate.limit
        limit_set = runner.set_max_in_flight(limit)
        if limit_set != before:
            self._record(
                f"max in flight {before} -> {limit_set}{why}",
                action="max_in_flight",
                value=limit_set,
                details={"max_in_flight": limit_set, "requested": limit},
            )
        return limit_set

    def drain(self, url: str, *, drained: bool = True) -> None:
        """Send the server at `url` no new work item (`drained`), or send it work again;
        what is in flight there goes on. `ControlRefused` when the run has no such server."""
        runner = self._steered()
        try:
            slot = runner.pool.drain(url, drained)
        except KeyError:
            # The URL is the asker's own text (a viewer's): escaped, as a requeue's id.
            raise ControlRefused(f"the run has no server {quote_text(url)}") from None
        message = (
            f"server {url} drained: no new work item is sent there; "
            f"{slot.in_flight} in flight there go on"
            if drained
            else f"server {url} undrained: work items are sent there again"
        )
        self._record(
            message,
            action="drain" if drained else "undrain",
            details={"server": url, "in_flight": slot.in_flight},
            server=url,
        )

    def requeue(self, rollout_id: str, *, by_rule: bool = False) -> str:
        """Cancel a work item's rollout on its server and run the item again under a new id,
        which is returned (`EvalRunner.requeue`; `ControlRefused` when it cannot be).
        `by_rule`: the `--requeue-stuck` rule asked, not a person (the record says so)."""
        runner = self._steered()
        new_id = runner.requeue(rollout_id)
        record = runner.board.records[rollout_id]
        reason = "rule" if by_rule else None
        if self._log is not None:
            self._log.write(
                "work item requeued: its rollout is cancelled and the item runs again under "
                "a new id" + (" (--requeue-stuck: it was stuck)" if by_rule else ""),
                step=CONTROL_STEP,
                details=_attempt_details(record, new_id, reason=reason),
            )
        self._recorder.requeued(record, new_id, reason=reason)
        return new_id

    def hedge(self, rollout_id: str) -> str:
        """Send a work item whose rollout is slow a second time under a new id, which is
        returned, leaving the first attempt running (`EvalRunner.hedge`, --hedge-after)."""
        runner = self._steered()
        new_id = runner.hedge(rollout_id)
        record = runner.board.records[rollout_id]
        if self._log is not None:
            self._log.write(
                "work item hedged (--hedge-after): a second attempt is sent under a new id; "
                "the first to finish is its result, the other is cancelled",
                step=CONTROL_STEP,
                details=_attempt_details(record, new_id),
            )
        self._recorder.requeued(record, new_id, reason="hedge")
        return new_id

    # -- what the run records besides (the board's and the session's hooks) ---------------

    def untracked(self, record: RolloutRecord) -> None:
        """The board's `on_untrack`: the run no longer follows `record`."""
        if self._log is not None:
            self._log.write(
                "stopped tracking a rollout; its server keeps it until its lease ends",
                step=CONTROL_STEP,
                details={
                    "rollout_id": record.rollout_id,
                    "row_index": record.row_index,
                    "run_index": record.run_index,
                },
            )
        self._recorder.untracked(record)

    def cancelled(self, record: RolloutRecord, cancel: CancelRequest) -> None:
        """The board's `on_cancel`: a cancel asked of the rollout's server (`c`, `C`, quitting
        with "cancel them", a Ctrl-C, a deadline), then its answer, each as it happens."""
        if self._log is not None:
            answer = cancel.disposition if cancel.error is None else f"error: {cancel.error}"
            answered = cancel.disposition is not None or cancel.error is not None
            self._log.write(
                f"its server answered the cancel: {answer}"
                if answered
                else "cancel asked of the rollout's server",
                step=CONTROL_STEP,
                details={
                    "disposition": cancel.disposition,
                    "error": cancel.error,
                    "rollout_id": record.rollout_id,
                    "row_index": record.row_index,
                    "run_index": record.run_index,
                },
            )
        self._recorder.cancel(record, cancel)

    def sent_by_hand(self, record: RolloutRecord, *, rerun_of: str | None = None) -> None:
        """A rollout was sent by hand (`EvalSession.submit`): outside the work items."""
        if self._log is not None:
            self._log.write(
                "rollout sent by hand, outside the work items",
                step=CONTROL_STEP,
                details={
                    "rerun_of": rerun_of,
                    "rollout_id": record.rollout_id,
                    "row_index": record.row_index,
                },
            )
        self._recorder.sent_by_hand(record, rerun_of)

    # -- helpers ---------------------------------------------------------------------------

    def _steered(self) -> EvalRunner:
        if self._runner is None:
            raise ControlRefused("the servers are not ready yet")
        return self._runner

    def _record_pause(self) -> None:
        self._record(
            "dispatch paused: no new work item is sent; those in flight go on",
            action="pause",
            details={"in_flight": self.state().in_flight},
        )

    def _record(
        self,
        message: str,
        *,
        action: str,
        value: int | None = None,
        details: Mapping[str, Any] | None = None,
        server: str | None = None,
    ) -> None:
        if self._log is not None:
            self._log.write(message, step=CONTROL_STEP, details=details)
        self._recorder.steered(action, value, server=server)


def _attempt_details(
    record: RolloutRecord, new_id: str, *, reason: str | None = None
) -> dict[str, Any]:
    """The logs.txt details of a requeue or hedge: the attempt and the one that follows it."""
    details: dict[str, Any] = {
        "new_rollout_id": new_id,
        "rollout_id": record.rollout_id,
        "row_index": record.row_index,
        "run_index": record.run_index,
    }
    if reason is not None:
        details["reason"] = reason
    return details
