"""`RunTimeline`: a run on one time axis, in seconds since the run's start.

What it keeps is what was seen, each with its time: every rollout's span in flight (from its
first status, the admission's answer, until it ended, was untracked, or its invocation
ended, exactly as a replay of transitions.jsonl plays it), the lane of the server it ran on,
how it ended; the run's max-in-flight as it was set; each server's spans down, draining or
restarting; refusals (a rollout its server never admitted, a model call answered 429); and
markers of what the user did and of stuck flags.

What it answers is computed from sorted arrays and `bisect`, once per change rather than per
question: the rollouts in flight at an instant, and for a picture `columns` wide over a
window, the most rollouts in flight within each column, the limit in force, the rollouts
that finished in each column by outcome, and the markers in it. A run of 10,000 rollouts is
a few tens of thousands of steps, summed once and then read a column at a time.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import accumulate

#: How a rollout left the flight, besides its terminal statuses (`success`, `failure`,
#: `cancelled`): its server never admitted it, or the run stopped following it.
NOT_ADMITTED = "not_admitted"
UNTRACKED = "untracked"
#: A server's state while the operator has it drained (it accepts, and is sent nothing new).
DRAINED = "drained"


class MarkerKind(str, Enum):
    """What a marker on the time line stands for."""

    PAUSE = "pause"
    RESUME = "resume"
    LIMIT = "limit"  # max-in-flight changed
    CANCEL = "cancel"
    REQUEUE = "requeue"
    MANUAL = "manual"  # a rollout sent by hand
    UNTRACK = "untrack"
    SESSION = "session"  # an invocation of the run began or ended
    STUCK = "stuck"
    RESTART = "restart"  # a server came back after a restart
    DRAIN = "drain"  # the operator drained a server, or undrained it


@dataclass(frozen=True)
class Marker:
    t: float
    kind: MarkerKind
    text: str
    rollout_id: str | None = None


@dataclass
class Span:
    """One rollout's time in flight: `start` ≤ t < `end` (None: still in flight)."""

    rollout_id: str
    start: float
    lane: str
    end: float | None = None
    #: How it ended: a terminal status, `not_admitted` or `untracked`; None while in flight.
    outcome: str | None = None


@dataclass
class ServerSpan:
    """A server in a state other than accepting, from `start` until `end` (None: still)."""

    lane: str
    state: str
    start: float
    end: float | None = None


@dataclass(frozen=True)
class Steps:
    """A step function: `values[i]` holds from `times[i]` until `times[i + 1]`; 0 before."""

    times: Sequence[float]
    values: Sequence[int]

    def at(self, t: float) -> int:
        index = bisect.bisect_right(self.times, t) - 1
        return self.values[index] if index >= 0 else 0

    def peaks(self, t0: float, t1: float, columns: int) -> list[int]:
        """The highest value within each of `columns` equal slices of [t0, t1)."""
        width = (t1 - t0) / columns
        times, values = self.times, self.values
        peaks = []
        index = -1  # the last step begun by the column's start
        for column in range(columns):
            begin, end = t0 + column * width, t0 + (column + 1) * width
            index = bisect.bisect_right(times, begin, lo=max(index, 0)) - 1
            peak = values[index] if index >= 0 else 0
            # Every step that begins inside the column counts too: a spike is never lost.
            inside = index
            while inside + 1 < len(times) and times[inside + 1] < end:
                inside += 1
                peak = max(peak, values[inside])
            peaks.append(peak)
        return peaks


def _steps(changes: Iterable[tuple[float, int]]) -> Steps:
    """The running sum of (time, delta) changes, one step per distinct time: at a time where
    a rollout ends and another begins, only the sum after both counts."""
    times: list[float] = []
    deltas: list[int] = []
    for t, delta in sorted(changes):
        if times and times[-1] == t:
            deltas[-1] += delta
        else:
            times.append(t)
            deltas.append(delta)
    return Steps(times, list(accumulate(deltas)))


@dataclass
class _Derived:
    """What the queries read, computed from the facts once after each change."""

    in_flight: Steps
    lanes: dict[str, Steps]
    #: The spans by start, and their starts (for `in_flight_at`).
    by_start: list[Span]
    starts: list[float]
    #: The finished spans by end, and their ends (for the rail).
    by_end: list[Span]
    ends: list[float]


@dataclass
class RunTimeline:
    """A run's time line; filled by `began`, `ended` and the rest, read by the queries."""

    spans: dict[str, Span] = field(default_factory=dict)
    #: (t, max-in-flight) as set, in time order.
    limits: list[tuple[float, int]] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    server_spans: list[ServerSpan] = field(default_factory=list)
    #: (t, lane) of each refusal: a rollout not admitted, a model call answered 429.
    refusals: list[tuple[float, str]] = field(default_factory=list)
    #: The latest moment the time line knows of (now, for a live run).
    end: float = 0.0
    #: Moves on with every change: a picture drawn at one version is good until the next.
    version: int = 0
    _derived: _Derived | None = field(default=None, repr=False)

    # -- filling ---------------------------------------------------------------------------

    def _changed(self, t: float) -> None:
        self.end = max(self.end, t)
        self.version += 1
        self._derived = None

    def began(self, rollout_id: str, t: float, lane: str = "") -> None:
        """`rollout_id` is in flight from `t` (a rollout seen again is left as it is)."""
        if rollout_id not in self.spans:
            self.spans[rollout_id] = Span(rollout_id, t, lane)
            self._changed(t)

    def assign_lane(self, rollout_id: str, lane: str) -> None:
        """The server a rollout ran on, once known (a server's report may come after its
        first poll); a rollout keeps the first server it was given."""
        span = self.spans.get(rollout_id)
        if span is not None and not span.lane and lane:
            span.lane = lane
            self._changed(span.start)

    def ended(self, rollout_id: str, t: float, outcome: str) -> None:
        """`rollout_id` left the flight at `t` (only the first end counts)."""
        span = self.spans.get(rollout_id)
        if span is not None and span.end is None:
            span.end, span.outcome = max(t, span.start), outcome
            self._changed(t)

    def limit(self, t: float, value: int) -> None:
        self.limits.append((t, value))
        self._changed(t)

    def mark(self, marker: Marker) -> None:
        self.markers.append(marker)
        self._changed(marker.t)

    def refused(self, t: float, lane: str) -> None:
        self.refusals.append((t, lane))
        self._changed(t)

    def server_state(self, lane: str, t: float, state: str) -> None:
        """`lane`'s server is in `state` from `t` on: the span of its previous state ends;
        a state other than accepting (down, draining, starting, stopped) opens one."""
        open_span = next(
            (span for span in self.server_spans if span.lane == lane and span.end is None), None
        )
        if open_span is not None:
            if open_span.state == state:
                return
            open_span.end = t
        elif state == "accepting":
            return
        if state != "accepting":
            self.server_spans.append(ServerSpan(lane, state, t))
        self._changed(t)

    def extend(self, t: float) -> None:
        """The time line reaches `t` (a live run's now), with nothing new."""
        if t > self.end:
            self.end = t
            self.version += 1

    # -- reading ---------------------------------------------------------------------------

    def _facts(self) -> _Derived:
        derived = self._derived
        if derived is None:
            spans = list(self.spans.values())
            changes: dict[str, list[tuple[float, int]]] = {}
            every: list[tuple[float, int]] = []
            for span in spans:
                lane = changes.setdefault(span.lane, [])
                if span.end == span.start:
                    continue  # never in flight (not admitted)
                lane.append((span.start, 1))
                every.append((span.start, 1))
                if span.end is not None:
                    lane.append((span.end, -1))
                    every.append((span.end, -1))
            by_start = sorted(spans, key=lambda span: span.start)
            by_end = sorted((s for s in spans if s.end is not None), key=lambda s: s.end or 0.0)
            derived = self._derived = _Derived(
                in_flight=_steps(every),
                lanes={lane: _steps(lane_changes) for lane, lane_changes in changes.items()},
                by_start=by_start,
                starts=[span.start for span in by_start],
                by_end=by_end,
                ends=[span.end or 0.0 for span in by_end],
            )
        return derived

    @property
    def start(self) -> float:
        """The earliest moment the time line knows of (0 or earlier)."""
        facts = self._facts()
        return min(0.0, facts.starts[0]) if facts.starts else 0.0

    def lanes(self) -> list[str]:
        """The servers' lanes, in the order their first rollout began (and those known only
        by their state after)."""
        lanes = dict.fromkeys(span.lane for span in self._facts().by_start)
        lanes.update(dict.fromkeys(span.lane for span in self.server_spans))
        return list(lanes)

    def in_flight_at(self, t: float, lane: str | None = None) -> list[str]:
        """The rollouts in flight at `t` (begun at or before it, not ended by then), in the
        order they began; only `lane`'s when given."""
        facts = self._facts()
        begun = bisect.bisect_right(facts.starts, t)
        return [
            span.rollout_id
            for span in facts.by_start[:begun]
            if (span.end is None or span.end > t) and (lane is None or span.lane == lane)
        ]

    def count_at(self, t: float, lane: str | None = None) -> int:
        facts = self._facts()
        steps = facts.in_flight if lane is None else facts.lanes.get(lane)
        return 0 if steps is None else steps.at(t)

    def limit_at(self, t: float) -> int | None:
        """Max-in-flight in force at `t`; None before any was set."""
        index = bisect.bisect_right(self.limits, (t, float("inf"))) - 1
        return self.limits[index][1] if index >= 0 else None

    def peaks(self, t0: float, t1: float, columns: int, lane: str | None = None) -> list[int]:
        """The most rollouts in flight within each of `columns` slices of [t0, t1)."""
        facts = self._facts()
        steps = facts.in_flight if lane is None else facts.lanes.get(lane)
        return [0] * columns if steps is None else steps.peaks(t0, t1, columns)

    def limit_columns(self, t0: float, t1: float, columns: int) -> list[int | None]:
        """Max-in-flight in force at the start of each column (None before any was set)."""
        width = (t1 - t0) / columns
        return [self.limit_at(t0 + column * width) for column in range(columns)]

    def finished_columns(self, t0: float, t1: float, columns: int) -> list[dict[str, int]]:
        """Per column of [t0, t1): how many rollouts left the flight in it, by outcome."""
        facts = self._facts()
        width = (t1 - t0) / columns
        cells: list[dict[str, int]] = [{} for _ in range(columns)]
        first = bisect.bisect_left(facts.ends, t0)
        last = bisect.bisect_left(facts.ends, t1)
        for span in facts.by_end[first:last]:
            column = min(int(((span.end or 0.0) - t0) / width), columns - 1)
            cell = cells[column]
            outcome = span.outcome or ""
            cell[outcome] = cell.get(outcome, 0) + 1
        return cells

    def markers_between(self, t0: float, t1: float) -> list[Marker]:
        return [marker for marker in self.markers if t0 <= marker.t < t1]

    def refusal_columns(self, t0: float, t1: float, columns: int, lane: str) -> list[int]:
        width = (t1 - t0) / columns
        cells = [0] * columns
        for t, refused_lane in self.refusals:
            if refused_lane == lane and t0 <= t < t1:
                cells[min(int((t - t0) / width), columns - 1)] += 1
        return cells

    def server_state_columns(self, t0: float, t1: float, columns: int, lane: str) -> list[str]:
        """Per column, the state other than accepting `lane`'s server was in for any of it
        ("" when accepting throughout); down above draining above the rest."""
        width = (t1 - t0) / columns
        cells = [""] * columns
        rank = {"down": 3, "draining": 2}
        for span in self.server_spans:
            if span.lane != lane:
                continue
            end = self.end if span.end is None else span.end
            if end < t0 or span.start >= t1:
                continue
            first = max(int((span.start - t0) / width), 0)
            last = min(int((end - t0) / width), columns - 1)
            for column in range(first, last + 1):
                if rank.get(span.state, 1) > rank.get(cells[column], 0):
                    cells[column] = span.state
        return cells
