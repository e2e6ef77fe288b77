"""What the dashboard watches: a live eval session, or a recorded run being replayed.

The dashboard reads only the board and this small interface; it never talks HTTP itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from core.board import RolloutBoard
from core.eval.compare.baseline import Baseline, BaselineCounts
from core.eval.cost.spend import Spend
from core.eval.dispatch_gate import DispatchState
from core.eval.event_silence import EventSilence
from core.eval.results.metrics import Progress
from core.eval.results.records import ItemKey, ItemResult
from core.eval.timeline.model import RunTimeline
from tui.sources.pass_rule import PassRule

if TYPE_CHECKING:
    from core.eval.servers.pool import RolloutServerSlot


@dataclass(frozen=True)
class ServerView:
    url: str
    state: str  # accepting | drained | draining | down | starting | stopped
    restarts: int = 0
    detail: str | None = None
    #: False once nothing watches it any more (the run has ended): `state` is the last seen.
    watched: bool = True
    #: Its /health's `max_concurrent` (None: it advertises none, or it is not known).
    capacity: int | None = None
    #: Admissions it answered 429 (busy) so far.
    busy: int = 0
    #: How long its latest answered /health read took.
    health_ms: float | None = None
    #: Its /health `instance_id`, the `server_id` its ownership events name it by when its
    #: rollouts are known by those alone (a watch's); None otherwise.
    server_id: str | None = None
    #: True for a start-up step standing in the servers' place while they start (its `url`
    #: says what is being done, and may name the servers' URLs): never a server's line.
    step: bool = False


def slot_view(slot: RolloutServerSlot, state: str, *, watched: bool) -> ServerView:
    """What a front end shows of a server the run (or watch) reaches through its pool: `state`
    as the source words it, `watched` while something still follows it."""
    return ServerView(
        slot.url,
        state,
        slot.restarts,
        slot.last_error,
        watched=watched,
        capacity=slot.capacity,
        busy=slot.client.busy_answers,
        health_ms=slot.health_ms,
        server_id=slot.instance_id,
    )


def step_view(doing: str, latest: str | None = None) -> ServerView:
    """A start-up step in the servers' place while they start: what is being done (it may
    name their URLs), and its latest output line."""
    return ServerView(doing, "starting", detail=latest, step=True)


STARTING = step_view("servers")
"""The header's place for the servers before the run has any: "○ servers starting"."""


@dataclass(frozen=True)
class RunEnding:
    """Why the work ended and how to go on from there: what the end banner says."""

    reason: str
    """What happened, in a line: "Run nightly interrupted: <folder>"."""
    problem: str | None = None
    """What stopped it, when something did (every server down, a server that never answered)."""
    next_steps: tuple[str, ...] = ()
    """The commands to go on from here (resume, run the failures again), each with its purpose."""
    complete: bool = False
    """Every work item has its result: nothing is left to resume."""


@dataclass(frozen=True)
class NewRollout:
    """A rollout typed in by hand (`n`)."""

    prompt: str
    label: str | None
    grade: bool
    agent_timeout_sec: float | None
    grader_timeout_sec: float | None
    system_prompt: str | None = None


class Player(Protocol):
    """The controls of a source that plays a recording back (a replay)."""

    board: RolloutBoard
    """The board played onto; going back replaces it with a new one, played from the start."""

    @property
    def paused(self) -> bool: ...

    @property
    def notes(self) -> list[tuple[float, str]]:
        """What the recording told besides the rollouts' states, at its moments."""
        ...

    @property
    def played(self) -> float:
        """Seconds of the recording played so far."""
        ...

    @property
    def length(self) -> float:
        """Seconds from the recording's start to its end."""
        ...

    @property
    def timeline(self) -> RunTimeline:
        """The whole recording's time line, in the seconds `played` and `seek` count."""
        ...

    def toggle_pause(self) -> None: ...

    def step(self) -> None:
        """Play the next event (while paused)."""
        ...

    def step_back(self) -> None: ...

    def faster(self) -> None: ...

    def slower(self) -> None: ...

    def seek(self, seconds: float) -> None: ...

    def rewind(self) -> None: ...

    def to_end(self) -> None: ...


class DashboardSource(Protocol):
    board: RolloutBoard

    # -- what this source can do: the keys and the quit follow from these -----------------

    @property
    def playback(self) -> Player | None:
        """The player when the source plays a recording back (the playback keys work); None
        for a run."""
        ...

    @property
    def sends_by_hand(self) -> bool:
        """Whether this dashboard may send rollouts by hand (`n`, `r`): the run's own, not a
        replay nor a viewer attached to the run from another process."""
        ...

    @property
    def is_watch(self) -> bool:
        """The rollouts are a watch's (`osmosis-tui watch`, live or replayed): nobody here sent
        them, so there is no dispatch to steer (pause, max-in-flight, requeue), and the table
        shows each one's run and server where a run's shows its row and attempt."""
        ...

    @property
    def detaches_on_quit(self) -> bool:
        """Quitting leaves the work going where it runs (a viewer attached to it): no
        question, nothing to wind down."""
        ...

    @property
    def servers_stop_with_run(self) -> bool:
        """The rollout servers are the run's own (a workspace's it launched, the demo's): they
        stop when it ends, and a rollout left in flight ends with them. False when they live
        on (`--server`, a replay, a viewer): a rollout left in flight runs until its lease
        expires."""
        ...

    @property
    def title(self) -> str: ...

    @property
    def subtitle(self) -> str: ...

    @property
    def read_only(self) -> bool:
        """True for replays: nothing can be cancelled, submitted or re-run."""
        ...

    @property
    def finished(self) -> bool:
        """The work is over (the run ended, or the replay reached its end)."""
        ...

    @property
    def can_send(self) -> bool:
        """Whether `submit` and `rerun` can reach a server now (not before the servers are up,
        nor after the run has ended and closed its connections)."""
        ...

    @property
    def preview_root(self) -> Path | None:
        """Where the rollout servers write their live previews (`<root>/<rollout_id>/
        preview.json`, PROTOCOL.md §8.2); None when there are none to read."""
        ...

    @property
    def trials_root(self) -> Path | None:
        """The run folder's `rollout_trials/`, where a rollout server leaves each finished
        attempt's trajectory (`<root>/<rollout_id>/trajectory.json`, EVAL.md §8); None when
        there is none to read."""
        ...

    @property
    def ending(self) -> RunEnding | None:
        """Once the work has ended: why, and how to go on; None until then."""
        ...

    def progress(self) -> Progress: ...

    @property
    def pass_rule(self) -> PassRule:
        """The run's attempts per row and pass threshold: what the rows × attempts grid
        counts by (the progress line counts with the same threshold)."""
        ...

    def carried_results(self) -> Mapping[ItemKey, ItemResult]:
        """The work items' results from before this invocation (a resumed run) that its board
        has no rollout of: done all the same. Empty for a replay, whose recording plays every
        invocation's rollouts onto its board."""
        ...

    def servers(self) -> list[ServerView]: ...

    @property
    def event_silence(self) -> EventSilence | None:
        """The run's servers that send it no ownership events, while they do not (a live
        `--server` run); None otherwise."""
        ...

    @property
    def baseline(self) -> Baseline | None:
        """The run this one is compared with live (`--baseline`): the table's base column and
        tint; None without one."""
        ...

    def baseline_counts(self) -> BaselineCounts | None:
        """This run's finished items counted against its baseline, as its one tally counts
        them (the summary strip's); None without a baseline."""
        ...

    def spend(self) -> Spend:
        """What the run spent on its model, its projection and its budget (the strip's)."""
        ...

    async def run(self) -> None:
        """Drive the work until it ends; the dashboard runs this in a worker."""
        ...

    async def interrupt(self, *, cancel_in_flight: bool) -> None: ...

    async def close(self) -> None:
        """The dashboard is gone: end the work if it still goes on (rollouts in flight are
        left to their leases) and return once it has ended and its results are written."""
        ...

    async def submit(self, rollout: NewRollout) -> str:
        """Send a rollout by hand; returns its id."""
        ...

    async def rerun(self, rollout_id: str) -> str:
        """Send a finished rollout's request again under a new id; returns the new id."""
        ...

    # -- steering the dispatch (a live run only) ---------------------------------------------
    # Async: a dashboard attached to the run from another process asks the run over its
    # control socket and waits for the answer; the run's own does it at once.

    def dispatch(self) -> DispatchState | None:
        """The run's dispatch as it is now (paused, max-in-flight, in flight, sent by hand);
        a replay's as recorded (nothing to steer), None when there is none."""
        ...

    async def pause_dispatch(self, paused: bool) -> None:
        """Stop sending new work items (those in flight go on), or send them again."""
        ...

    async def set_budget(self, usd: float) -> None:
        """Make `usd` the run's `--budget` (a pause it made is lifted when the projection is
        within it)."""
        ...

    async def set_max_in_flight(self, limit: int) -> int:
        """Change the most work items in flight at once (lowering it cancels nothing); returns
        the limit set, within the servers' capacity."""
        ...

    async def requeue(self, rollout_id: str) -> str:
        """Cancel a work item's rollout on its server and run the item again under a new id;
        returns the new id."""
        ...

    async def drain(self, url: str, *, drained: bool) -> None:
        """Send the server at `url` no new work item (`drained`), or send it work again; what
        is in flight there goes on."""
        ...
