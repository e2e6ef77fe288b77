"""`RolloutRecord`: one rollout on the board, what was asked of it and what was observed.

A record reads its observations from the rollout's handle (or, without one, from a
`RecordedRollout`) instead of copying them; what only the run knows (the request options,
cancels, untracking, an admission error, whether it was sent by hand or requeued) it holds
itself. No Textual here.

Three sources tell when a rollout entered each phase: the polls, which see a status only if it
lasts until the next poll, the server's ownership events (PROTOCOL.md §8.1), which report
every status with the server's own clock, and, for `running`, the rollout's first model call
through the run's gateway (`RolloutBoard._model_proves_running`). A record keeps one
`PhaseMark` per status, the server's word where it has one, else the earliest of the others:
its phase track, skip reasons and durations read the marks, so "not observed" means that no
source knows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from core.handle import RolloutHandle, Transition
from core.model_activity import ModelActivity
from core.packed_transitions import PackedTransitions
from core.phase_marks import PhaseMarks
from core.phases import PhaseMark, SkipReason, skipped_phases
from core.reported_by import ReportedBy
from core.result_head import ResultHead
from core.spill_file import SpillFile
from core.types import (
    PHASE_ORDER,
    RECEIVED,
    TERMINAL_STATUSES,
    CancelRolloutsResponse,
    RolloutResultResponse,
    RolloutStatus,
)

#: The status the board shows for a rollout the server never accepted.
NOT_ADMITTED = "not_admitted"
#: The statuses a front end shows rollouts in, in lifecycle order: the protocol's own (but
#: `unknown`, never a state a rollout stays in), then the board's `not_admitted`.
DISPLAY_STATUSES: tuple[str, ...] = (
    *(status.value for status in RolloutStatus if status is not RolloutStatus.UNKNOWN),
    NOT_ADMITTED,
)


class Canceller(Protocol):
    """Who asks a rollout's server to cancel it: the `RolloutClient` that sent it, or, on a
    dashboard attached to another process's run, that process (which asks the server)."""

    async def cancel_rollout(self, rollout_id: str) -> CancelRolloutsResponse: ...


def _order(mark: PhaseMark) -> tuple[int, float]:
    return PHASE_ORDER.get(mark.status, len(PHASE_ORDER)), mark.at


def _furthest_reported(marks: PhaseMarks) -> RolloutStatus:
    """The status a server's reports leave a rollout in: the terminal one once reported (a
    server ends a rollout once), else the furthest phase; queued before any report."""
    ended = [status for status in marks if status in TERMINAL_STATUSES]
    if ended:
        return ended[0]
    return max(marks, key=lambda status: PHASE_ORDER.get(status, -1), default=RolloutStatus.QUEUED)


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """What was asked of the server for one rollout. The llm_api_key is deliberately absent.

    A fact the board records (the details show it, a re-run sends it again); sending it is
    the eval runner's job (`EvalRunner.submit`), not the board's."""

    initial_messages: tuple[dict[str, Any], ...]
    chat_completions_url: str
    label: str | None = None
    metadata: dict[str, Any] | None = None
    grade: bool = True
    agent_timeout_sec: float | None = None
    grader_timeout_sec: float | None = None


@dataclass(slots=True)
class CancelRequest:
    """One server-side cancel: when it was asked, what the server said, when it ended."""

    requested_at: float
    disposition: str | None = None
    error: str | None = None
    answered_at: float | None = None


@dataclass(eq=False, slots=True)
class RecordedRollout:
    """What is known of a rollout without a handle to ask: one replayed from a recording, one
    the server never admitted, or one whose handle is done (`of`). It has the handle's names,
    so a record reads either alike.

    Its result is kept whole, or, for a finished handle's, packed: its JSON, a few hundred
    bytes where the parsed models take about eight times as much, parsed again each time the
    details ask for it, and kept in a spill file (`core.spill_file`) when the board has one.
    Its `result_head` is what every row reads, always at hand."""

    status: RolloutStatus = RolloutStatus.QUEUED
    #: A finished handle's are packed (they never change again); `seen` adds one.
    transitions: list[Transition] | PackedTransitions = field(default_factory=list)
    grade: bool | None = None
    polls: int = 0
    poll_retries: int = 0
    last_poll_error: str | None = None
    result_head: ResultHead | None = field(default=None, init=False)
    _result: RolloutResultResponse | None = field(default=None, init=False, repr=False)
    _packed: bytes | None = field(default=None, init=False, repr=False)
    # Where the packed result went instead, and its key there.
    _spill: SpillFile | None = field(default=None, init=False, repr=False)
    _spilled: int = field(default=0, init=False, repr=False)

    @classmethod
    def of(cls, handle: RolloutHandle, spill: SpillFile | None = None) -> RecordedRollout:
        """What `handle` observed, without its polling state (lease, headers, lock, task); its
        result packed, and written to `spill` when there is one."""
        recorded = cls(
            status=handle.status,
            transitions=PackedTransitions(handle.transitions),
            grade=handle.grade,
            polls=handle.polls,
            poll_retries=handle.poll_retries,
            last_poll_error=handle.last_poll_error,
        )
        result = handle.latest_result
        if result is not None:
            recorded.result_head = ResultHead.of(result)
            # Only the fields the server sent: parsed again, the same model, to its fields set.
            packed = result.model_dump_json(exclude_unset=True).encode()
            key = None if spill is None else spill.put(packed)
            if key is None:
                recorded._packed = packed
            else:
                recorded._spill, recorded._spilled = spill, key
        return recorded

    def seen(self, transition: Transition) -> None:
        """A status observed (a recording's next line): it is the status from now on."""
        transitions = self.transitions
        if not isinstance(transitions, list):
            transitions = self.transitions = list(transitions)
        transitions.append(transition)
        self.status = transition.status

    @property
    def latest_result(self) -> RolloutResultResponse | None:
        packed = self._packed
        if packed is None:
            if self._spill is None:
                return self._result
            packed = self._spill.get(self._spilled)
        return RolloutResultResponse.model_validate_json(packed, context=RECEIVED)

    @latest_result.setter
    def latest_result(self, result: RolloutResultResponse | None) -> None:
        self._result = result
        self._packed = None
        self._spill = None
        self.result_head = None if result is None else ResultHead.of(result)


@dataclass(eq=False, slots=True)
class RolloutRecord:
    """One rollout on the board: what was asked and done (options, cancels, untracking), and
    what was observed of it, read from its handle (or its recording) rather than copied."""

    rollout_id: str
    #: The work item's row as the results files key it: its position among the run's selected
    #: rows (EVAL.md §3). None for a rollout sent by hand.
    row_index: int | None
    run_index: int | None
    #: What was asked of the server: read it as `options`, which finds it wherever it is
    #: (here, or in the spill file once the rollout finished: `spill_request`).
    request: RequestOptions | None
    server: str
    submitted_at: float
    #: The dataset's own row (its 0-based record in the file, what `--rows` selects): the row
    #: a front end shows. None for a rollout sent by hand.
    source_row_index: int | None = None
    #: Where the observations come from: the live handle, or what was recorded without one.
    observed: RolloutHandle | RecordedRollout = field(default_factory=RecordedRollout)
    #: Where a cancel of it goes (`RolloutBoard.cancel_on_server`); None when nowhere can.
    client: Canceller | None = None
    #: Its server-side cancels, oldest first: a tuple, so that the many rollouts never
    #: cancelled share the empty one (a list each would cost 56 bytes a finished rollout).
    cancels: tuple[CancelRequest, ...] = ()
    untracked: bool = False
    #: When the board stopped tracking it (the run's timeline ends its flight there).
    untracked_at: float | None = None
    admission_error: str | None = None
    #: Sent by hand from the dashboard (a new rollout, a re-run): no work item's attempt, so
    #: never journaled and outside the run's progress and results.
    manual: bool = False
    #: The id its work item runs again under, once it was requeued (cancelled on its server,
    #: its outcome no longer the item's).
    requeued_as: str | None = None
    #: The other attempt of its work item when one of the two is a hedge (`--hedge-after`):
    #: set on both, once the hedge is on the board; the first to finish is the result.
    hedged_with: str | None = None
    #: Masks secrets in the error texts the record shows (a server's message may quote a key).
    redact: Callable[[str], str] | None = field(default=None, repr=False)
    #: Its model calls through the run's gateway.
    model: ModelActivity = field(default_factory=ModelActivity)
    #: One mark per status it got, by status; kept by the board (`RolloutBoard.server_mark`
    #: and the polls it accounts for), packed once it finished.
    marks: PhaseMarks = field(default_factory=PhaseMarks)
    #: Set for a rollout known only from its server's reports (`osmosis-tui watch`): nobody
    #: here sent or polls it, so its status is the furthest its server reported, a terminal
    #: one included, and it has no result (the events carry none).
    reported_by: ReportedBy | None = None
    #: False when nobody watched its phases: a rollout a run folder's journal and log tell of
    #: (an official run's, or one the official tool ran in a run resumed with it), whose
    #: dispatch and result are known but not when it was queued, running or grading.
    phases_recorded: bool = True
    # Where `request` went once the rollout finished, and its key there (`spill_request`).
    _spill: SpillFile | None = field(default=None, init=False, repr=False)
    _spilled_request: int = field(default=0, init=False, repr=False)
    # Its label, kept at hand when `request` went there: the `/` filter reads every row's.
    _spilled_label: str | None = field(default=None, init=False, repr=False)
    # The last text masked and its masked form: read on every repaint, it changes rarely.
    _shown_poll_error: tuple[str, str] | None = field(default=None, init=False, repr=False)
    _shown_head: tuple[ResultHead, ResultHead] | None = field(default=None, init=False, repr=False)

    @property
    def options(self) -> RequestOptions | None:
        """What was asked of the server (its initial messages, chat URL, label, metadata):
        what the details show and a re-run sends again. Read back from the spill file for a
        finished rollout, as a new copy each time."""
        if self._spill is None:
            return self.request
        options: RequestOptions = self._spill.get_object(self._spilled_request)
        return options

    @options.setter
    def options(self, options: RequestOptions | None) -> None:
        self.request, self._spill, self._spilled_label = options, None, None

    @property
    def asked(self) -> bool:
        """Whether `options` are known (without reading them back)."""
        return self.request is not None or self._spill is not None

    @property
    def label(self) -> str | None:
        """The label of what was asked (without reading the rest back)."""
        request = self.request
        return request.label if request is not None else self._spilled_label

    def spill_request(self, spill: SpillFile) -> None:
        """Keep `options` in `spill` rather than in memory: the rollout finished, and what
        it was asked (its messages, above all) is read again only when someone looks. Kept
        here when the file cannot be written."""
        if self.request is None:
            return
        key = spill.put_object(self.request)
        if key is not None:
            self._spilled_label = self.request.label
            self.request, self._spill, self._spilled_request = None, spill, key

    @property
    def handle(self) -> RolloutHandle | None:
        observed = self.observed
        return observed if isinstance(observed, RolloutHandle) else None

    @property
    def status(self) -> RolloutStatus:
        """The furthest status known: the poll's, or a later phase the server reported (or a
        model call proved).

        A terminal status is only ever the poll's: the result that comes with it is what the
        run records, and a server's `success` without it would finish nothing."""
        if self.reported_by is not None:
            return _furthest_reported(self.marks)
        polled = self.observed.status
        if polled in TERMINAL_STATUSES or polled not in PHASE_ORDER:
            return polled
        furthest = polled
        for status, mark in self.marks.items():
            if (
                mark.source != "poll"
                and status not in TERMINAL_STATUSES
                and PHASE_ORDER.get(status, -1) > PHASE_ORDER[furthest]
            ):
                furthest = status
        return furthest

    @property
    def transitions(self) -> Sequence[Transition]:
        """The statuses the polls observed, in order (the handle's own list)."""
        return self.observed.transitions

    def timeline(self) -> list[PhaseMark]:
        """The marks in lifecycle order: what the phase track and the details show."""
        return sorted(self.marks.values(), key=_order)

    @property
    def grade(self) -> bool | None:
        """Whether grading was asked for; None when not known (a replay of an old recording)."""
        return self.observed.grade

    @property
    def polls(self) -> int:
        return self.observed.polls

    @property
    def poll_retries(self) -> int:
        return self.observed.poll_retries

    @property
    def latest_result(self) -> RolloutResultResponse | None:
        """The whole result, its error masked: for the details and the exports (a row reads
        `result_head`), so it is not kept; a finished rollout's is parsed for each caller."""
        result = self.observed.latest_result
        if result is None or not result.err_message or self.redact is None:
            return result
        message = self.redact(result.err_message)
        if message == result.err_message:
            return result
        return result.model_copy(update={"err_message": message})

    @property
    def result_head(self) -> ResultHead | None:
        """What its result says of its outcome (`latest_result`'s head, its error masked the
        same way): what a row, a sort or a count reads, without parsing a packed result."""
        observed = self.observed
        if isinstance(observed, RecordedRollout):
            head = observed.result_head
        else:  # a handle, still polling: its latest result is at hand
            result = observed.latest_result
            head = None if result is None else ResultHead.of(result)
        if head is None or not head.err_message or self.redact is None:
            return head
        shown = self._shown_head
        if shown is None or shown[0] != head:
            message = self.redact(head.err_message)
            masked = head if message == head.err_message else replace(head, err_message=message)
            shown = self._shown_head = (head, masked)
        return shown[1]

    def masked(self, text: str) -> str:
        """`text` (anything the rollout's request, result or model calls hold) as a front end
        may show it: the run's secrets masked, as in the error texts above. A model may echo
        the key it was given into its reply, and the reply into the sample."""
        return text if self.redact is None else self.redact(text)

    @property
    def poll_error(self) -> str | None:
        """Why polling is being retried, or why it ended."""
        error = self.observed.last_poll_error
        if error is None or self.redact is None:
            return error
        shown = self._shown_poll_error
        if shown is None or shown[0] is not error:
            shown = self._shown_poll_error = (error, self.redact(error))
        return shown[1]

    @property
    def terminal_at(self) -> float | None:
        if self.admission_error is not None:
            return self.submitted_at
        status = self.status
        if status not in TERMINAL_STATUSES:
            return None
        at = self.marks.at(status)
        # A terminal status is always the last one the polls observed.
        return at if at is not None else self.transitions[-1].at

    @property
    def display_status(self) -> str:
        """One of `DISPLAY_STATUSES` (or a status no server should send, such as `unknown`)."""
        return NOT_ADMITTED if self.admission_error is not None else self.status.value

    @property
    def finished(self) -> bool:
        return self.admission_error is not None or self.status in TERMINAL_STATUSES

    @property
    def in_flight(self) -> bool:
        """Still running on the server, as far as we know, and still watched by us."""
        return self.in_flight_status is not None

    @property
    def in_flight_status(self) -> RolloutStatus | None:
        """Its status while `in_flight`, else None: both from one derivation of the status,
        which a sort over every row would otherwise pay for twice."""
        if self.untracked or self.admission_error is not None:
            return None
        status = self.status
        return None if status in TERMINAL_STATUSES else status

    @property
    def phase_started_at(self) -> float:
        return self.entered_at(self.status)

    def entered_at(self, status: RolloutStatus) -> float:
        """When it entered `status`, its current one (`phase_started_at` for a caller that
        has the status at hand: deriving it is the costly part of a sort over every row)."""
        at = self.marks.at(status)
        if at is not None:
            return at
        return self.transitions[-1].at if self.transitions else self.submitted_at

    @property
    def cancelling(self) -> bool:
        """A cancel was asked for and not refused, and the rollout has not ended yet (a cancel
        whose request failed leaves the rollout as it was: not "cancelling")."""
        return bool(self.cancels) and not self.finished and self.cancels[-1].error is None

    def skipped_phases(self) -> dict[RolloutStatus, SkipReason]:
        """The phases no source saw, and why (see `core.phases.skipped_phases`)."""
        return skipped_phases(
            {*self.marks, *(transition.status for transition in self.transitions)},
            self.status,
            grade=self.grade,
            result=self.result_head,
            recorded=self.phases_recorded,
        )

    def matches(self, text: str) -> bool:
        """Case-insensitive match on id, row, status, error and label, and for a rollout known
        from its server's reports its server, namespace and run: what the `/` filter uses."""
        needle = text.casefold()
        result = self.result_head
        haystack = [
            self.rollout_id,
            "" if self.source_row_index is None else f"row {self.source_row_index}",
            self.display_status,
            self.admission_error or "",
            (result.err_message or "") if result else "",
            (result.err_category.value if result and result.err_category else ""),
            self.label or "",
            *(self.reported_by.texts() if self.reported_by else ()),
        ]
        return any(needle in part.casefold() for part in haystack)
