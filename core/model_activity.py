"""A rollout's model calls, as the eval's gateway reports them while they happen.

The board keeps one `ModelActivity` per rollout (on its record) and feeds it from the
gateway's hooks; `ModelCallReport` is the shape of a call it is given, so that the Protocol
part needs nothing of the eval. A finished rollout's calls go to the run's spill file
(`core.spill_file`): with real conversations they are most of what a rollout costs. No Textual
here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from core.spill_file import SpillFile

# Model calls a record keeps (the latest that ended); its counts and sums cover every call.
MODEL_CALLS_KEPT = 50


class ModelCallReport(Protocol):
    """A model call as the board keeps it: what the eval's gateway reports
    (`core.eval.results.calls.ModelCall` fits), so that the board needs nothing of the eval."""

    @property
    def call_id(self) -> int: ...
    @property
    def rollout_id(self) -> str: ...
    @property
    def started_monotonic(self) -> float: ...
    @property
    def ended_monotonic(self) -> float | None:
        """None while the call waits for the model."""
        ...

    @property
    def status(self) -> int | None:
        """The status the rollout was answered with; None when the call was abandoned."""
        ...

    @property
    def total_tokens(self) -> int | None: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def request_text(self) -> str:
        """The request's last message, already redacted and bounded."""
        ...

    @property
    def reply_text(self) -> str | None:
        """The reply, already redacted and bounded."""
        ...

    @property
    def error(self) -> str | None: ...
    @property
    def latency_sec(self) -> float | None: ...


#: No call in flight: shared by every activity without one.
NONE_IN_FLIGHT: Mapping[int, ModelCallReport] = MappingProxyType({})


@dataclass(slots=True)
class ModelActivity:
    """A rollout's model calls, as the gateway reported them while they happened."""

    # `recent`'s list; None once it went to a spill file (`spill_to`), under `_spilled`.
    _recent: list[ModelCallReport] | None = field(default_factory=list, repr=False)
    _spill: SpillFile | None = field(default=None, repr=False)
    _spilled: int = field(default=0, repr=False)
    in_flight: Mapping[int, ModelCallReport] = field(default_factory=lambda: NONE_IN_FLIGHT)
    """The calls waiting for the model now, by call id, oldest first: the one shared empty
    mapping while there are none (a dict each, even empty, is 64 bytes a finished rollout)."""
    calls: int = 0
    """Every call started, including those no longer in `recent`."""
    failed: int = 0
    """Calls that ended without a 200 (an error answered, or abandoned)."""
    tokens: int | None = None
    """Σ `total_tokens` of the calls that reported usage; None while none did."""
    cost_usd: float | None = None
    """Σ cost of the calls whose price is known; None while none was."""
    last_ended_at: float | None = None
    """When the latest call ended (monotonic)."""
    first_started_at: float | None = None
    """When its first call began (monotonic): from then on the rollout was running
    (`RolloutBoard` makes it the rollout's `running` mark when nothing says better)."""

    @property
    def recent(self) -> list[ModelCallReport]:
        """The latest calls that ended, oldest first (at most `MODEL_CALLS_KEPT`; added by
        `keep`). A list, not a bounded deque: a deque takes 624 bytes before its first call,
        and a long run keeps one activity per finished rollout. Read back from the spill
        file once the calls went there: a copy, each time."""
        recent = self._recent
        if recent is None:
            assert self._spill is not None
            calls: list[ModelCallReport] = self._spill.get_object(self._spilled)
            return calls
        return recent

    def spill_to(self, spill: SpillFile) -> None:
        """Keep the ended calls in `spill` rather than in memory (its rollout finished: they
        are read when someone looks at them, if ever). Kept where they are when it cannot
        take them."""
        recent = self._recent
        if not recent:
            return
        key = spill.put_object(recent)
        if key is not None:
            self._recent, self._spill, self._spilled = None, spill, key

    @property
    def waiting_since(self) -> float | None:
        """The start (monotonic) of the oldest call still waiting for the model."""
        oldest = next(iter(self.in_flight.values()), None)
        return None if oldest is None else oldest.started_monotonic

    def started(self, call: ModelCallReport) -> None:
        """`call` began: it is in flight until `ended`."""
        self.calls += 1
        self.waiting(call)
        started = call.started_monotonic
        if self.first_started_at is None or started < self.first_started_at:
            self.first_started_at = started

    def waiting(self, call: ModelCallReport) -> None:
        """`call` waits for the model (`started` counts it; a mirror of another process's
        run, whose counts come with it, adds it alone)."""
        in_flight = self.in_flight
        if not isinstance(in_flight, dict):
            in_flight = self.in_flight = {}
        in_flight[call.call_id] = call

    def ended(self, call: ModelCallReport) -> None:
        """`call` ended (answered, failed or abandoned)."""
        in_flight = self.in_flight
        if isinstance(in_flight, dict):
            in_flight.pop(call.call_id, None)
            if not in_flight:
                # An emptied dict keeps its table (160 bytes), and a finished rollout keeps
                # its activity for the rest of the run.
                self.in_flight = NONE_IN_FLIGHT
        self.keep(call)
        self.last_ended_at = call.ended_monotonic
        if call.status != 200:
            self.failed += 1
        if call.total_tokens is not None:
            self.tokens = (self.tokens or 0) + call.total_tokens
        if call.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + call.cost_usd

    def keep(self, call: ModelCallReport) -> None:
        """Add the ended `call` to `recent`, letting the oldest go past `MODEL_CALLS_KEPT`
        (a call ending after its rollout brings the spilled calls back to memory)."""
        recent = self.recent
        recent.append(call)
        if len(recent) > MODEL_CALLS_KEPT:
            del recent[0]
        self._recent, self._spill = recent, None

    def latest(self) -> ModelCallReport | None:
        """The call started last: the newest in flight, else the latest that ended."""
        if self.in_flight:
            return [*self.in_flight.values()][-1]
        recent = self.recent
        return recent[-1] if recent else None
