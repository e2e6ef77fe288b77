"""`osmosis-tui replay RUN`: play a recorded run back on the dashboard.

Read-only. `RUN` is a run folder or its `transitions.jsonl`: the recording (with the model
calls of `calls.jsonl` and the results of `events.jsonl` beside it) is played at `speed`
times its own pace, long idle gaps shortened; a folder without a recording (an official
`osmosis eval run`'s) plays each result at the time its logs.txt says
(`core.eval.results.official_timeline`). The player pauses, steps one event, changes speed, seeks
to a time and steps back; going back builds the board again from the start
(`tui.sources.replay_state`), and the app shows the new board (`DashboardApp.use_board`).

The numbers are the run's: progress is counted with the run's pass threshold (its
metrics.json's, else the one its manifest was created with, else the default) and its
number of work items (from its manifest), cancelled and untracked attempts as the live run
counted them, and the tokens are the model calls' as the live dashboard summed them (a
rollout no recording tells of: its result's, see `core.eval.results.official_timeline`).
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.eval.cost.spend import Spend, board_spend
from core.eval.dispatch_gate import DispatchState
from core.eval.duration_text import duration
from core.eval.errors import EvalError
from core.eval.results.events import Journal
from core.eval.results.folder import (
    EVENTS_FILE,
    MANIFEST_FILE,
    METRICS_FILE,
    PREVIEWS_DIR,
    TRANSITIONS_FILE,
    TRIALS_DIR,
)
from core.eval.results.manifest import work_item_count
from core.eval.results.metrics import Progress
from core.eval.results.official_timeline import attempt_of, read_results_timeline
from core.eval.results.recording import (
    ReplayEvent,
    ResultSeen,
    SentByHand,
    SessionEnded,
    SessionStarted,
    StatusSeen,
    read_recording,
)
from core.eval.results.records import ItemKey, ItemResult
from core.eval.timeline.model import Marker, MarkerKind, RunTimeline
from core.eval.timeline.recorded import timeline_of_recording
from core.eval.untrusted_json import load_json_file
from core.types import RolloutStatus
from tui.sources.base import NewRollout, RunEnding, ServerView
from tui.sources.pass_rule import recorded_pass_rule
from tui.sources.replay_state import ReplayState
from tui.sources.watch_progress import rollouts_ended

# Gaps longer than this in the recording (an idle resume, a long wait) are shortened.
MAX_GAP_SEC = 5.0


class ReplayError(EvalError):
    """The recording cannot be read (the message names the file and why)."""


def recording_of(path: Path) -> tuple[Path, Path | None]:
    """The run folder `path` names (the folder, or a file in it) and its recording, None when
    it has none (an official run's folder)."""
    folder = path if path.is_dir() else path.parent
    recording = path if path.is_file() else folder / TRANSITIONS_FILE
    return folder, recording if recording.is_file() else None


class ReplaySource:
    """Feeds a board from a recording; pause, step, speed, seek and step back are the
    player's controls."""

    def __init__(self, path: Path, *, speed: float = 1.0) -> None:
        self.folder, self.recording = recording_of(path)
        self.path = self.recording or self.folder
        self.warnings: list[str] = []
        history = self._journal_history()
        try:
            if self.recording is not None:
                events = read_recording(self.recording, self.warnings)
                events += _results_without_an_end(events, history)
                events += self._last_session_end(events)
            else:
                events = read_results_timeline(self.folder, history, self.warnings)
        except OSError as exc:
            raise ReplayError(f"{self.path}: {exc.strerror or exc}") from exc
        events.sort(key=lambda event: event.t)
        if not any(isinstance(event, StatusSeen) for event in events):
            raise ReplayError(f"{self.path}: no rollout to replay")
        self.events: list[ReplayEvent] = events
        self._origin = events[0].t
        self._times = [event.t - self._origin for event in events]
        self._journal = {result.rollout_id: result for result in history}
        self._manual = frozenset(e.rollout_id for e in events if isinstance(e, SentByHand))
        self._ids = {e.rollout_id for e in events if isinstance(e, StatusSeen)}
        #: A watch's recording: its rollouts were reported by their servers, nobody sent them.
        self._watched = any(
            isinstance(event, StatusSeen) and event.reported_by is not None for event in events
        )
        manifest = self._json_beside(MANIFEST_FILE)
        #: The run's attempts per row and threshold (`recorded_pass_rule`).
        self.pass_rule = recorded_pass_rule(self._json_beside(METRICS_FILE), manifest)
        inputs = manifest.get("inputs") if isinstance(manifest, dict) else None
        counted = work_item_count(inputs) if isinstance(inputs, dict) else None
        #: The run's work items; without a manifest, the ones the recording attempted.
        self.total_items = counted if counted is not None else self._attempted_items()
        self.state = self._fresh_state(time.monotonic())
        self.board = self.state.board
        self.speed = speed
        self.paused = False
        #: How many events have been played.
        self.position = 0
        self._played = 0.0  # recording seconds played so far
        # Steps asked for while paused, not yet played: a step pressed before the player
        # reached its pause is kept, never lost.
        self._pending_steps = 0
        # Moved on by every seek: a wait of the player that sees it changed starts over.
        self._generation = 0
        self._wake = asyncio.Event()
        self._timeline: RunTimeline | None = None
        #: (rollout, phase) flagged stuck on the time line: once, however often played.
        self._stuck_flagged: set[tuple[str, RolloutStatus]] = set()

    def _journal_history(self) -> list[ItemResult]:
        """Every record of the run's journal; none, with a warning, when it cannot be read
        (a FIFO, a symlink: a folder someone handed over)."""
        path = self.folder / EVENTS_FILE
        try:
            return Journal.history(path, on_warning=self.warnings.append)
        except OSError as exc:
            self.warnings.append(f"{path}: not read ({exc.strerror or exc})")
            return []

    def _json_beside(self, name: str) -> Any:
        """The JSON document `name` in the run folder; None when absent or unreadable."""
        document = self.folder / name
        try:
            return load_json_file(document)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.warnings.append(f"{document}: not read ({exc.strerror or exc})")
            return None
        except ValueError as exc:
            self.warnings.append(f"{document}: not read ({exc})")
            return None

    def _last_session_end(self, events: list[ReplayEvent]) -> list[ReplayEvent]:
        """The end of the last invocation, once it wrote its results (its metrics.json is no
        longer `running`); nothing for a run that still goes on, or was killed."""
        metrics = self._json_beside(METRICS_FILE)
        eval_run = metrics.get("eval_run") if isinstance(metrics, dict) else None
        state = eval_run.get("status") if isinstance(eval_run, dict) else None
        sessions = sum(isinstance(event, SessionStarted) for event in events)
        if state not in ("finished", "incomplete") or not sessions:
            return []
        return [SessionEnded(max(event.t for event in events), sessions)]

    def _attempted_items(self) -> int:
        return len(
            {
                (event.row_index, event.run_index)
                for event in self.events
                if isinstance(event, StatusSeen)
                and event.row_index is not None
                and event.run_index is not None
                and event.rollout_id not in self._manual
            }
        )

    def _fresh_state(self, started_at: float) -> ReplayState:
        """Nothing played yet, on a board whose time 0 is at `started_at`."""
        return ReplayState(
            started_at=started_at,
            journal=self._journal,
            manual=self._manual,
        )

    # -- what the dashboard reads ----------------------------------------------------------

    @property
    def title(self) -> str:
        return f"replay of {self.folder.name or self.path.name}"

    @property
    def subtitle(self) -> str:
        state = "paused" if self.paused else f"{self.speed:g}x"
        return " · ".join(
            [
                f"{self.position}/{len(self.events)} events",
                f"{duration(self._played)} of {duration(self.length)}",
                state,
                f"{len(self._ids)} rollouts",
            ]
        )

    @property
    def playback(self) -> ReplaySource:
        return self

    @property
    def sends_by_hand(self) -> bool:
        return False

    @property
    def is_watch(self) -> bool:
        return self._watched

    @property
    def detaches_on_quit(self) -> bool:
        return False

    @property
    def servers_stop_with_run(self) -> bool:
        return False

    @property
    def read_only(self) -> bool:
        return True

    @property
    def finished(self) -> bool:
        return self.position >= len(self.events)

    @property
    def can_send(self) -> bool:
        return False

    @property
    def event_silence(self) -> None:
        # Nothing to act on in a replay: the run said it in its logs.txt.
        return None

    @property
    def preview_root(self) -> Path | None:
        """The recorded run's previews, when they sit beside the recording: a replay shows
        each rollout's last preview (the files stopped changing when the run ended)."""
        previews = self.folder / PREVIEWS_DIR
        return previews if previews.is_dir() else None

    @property
    def trials_root(self) -> Path | None:
        """The recorded run's `rollout_trials/`: a finished rollout's conversation, in the
        trajectory its server left, when it has no final sample with messages."""
        trials = self.folder / TRIALS_DIR
        return trials if trials.is_dir() else None

    @property
    def ending(self) -> RunEnding | None:
        if not self.finished:
            return None
        done = self.progress()
        counted = (
            f"{done.done} of {done.total} rollouts ended"
            if self._watched
            else f"{done.done} of {done.total} work items have their result"
        )
        return RunEnding(
            f"end of recording: all {len(self.events)} events played, "
            f"{duration(self.length)} of the run; {counted}",
            next_steps=(
                "< plays it again from the start, , steps back one event, : jumps to a time",
            ),
            complete=done.done >= done.total,
        )

    @property
    def notes(self) -> list[tuple[float, str]]:
        """What the live event log told of, up to the replayed moment: (seconds, text)."""
        return self.state.notes

    @property
    def played(self) -> float:
        """How far into the recording the replay is, in seconds."""
        return self._played

    @property
    def length(self) -> float:
        """The recording's length in seconds, from its first event to its last."""
        return self._times[-1]

    @property
    def timeline(self) -> RunTimeline:
        """The whole recording's time line, in seconds since its start (as `played` and
        `seek` count them): made once, on first use. Its stuck flags are the board's, added
        as the player gets to them (`_apply`): up to the event after the furthest point
        played."""
        if self._timeline is None:
            self._timeline = timeline_of_recording(self.events, self._origin)
        return self._timeline

    def progress(self) -> Progress:
        """The run's progress as of the replayed moment (a watch's: its rollouts ended)."""
        if self._watched:
            return rollouts_ended(self.board)
        return self.state.progress(
            self.clock(), total_items=self.total_items, pass_threshold=self.pass_rule.threshold
        )

    def carried_results(self) -> Mapping[ItemKey, ItemResult]:
        return {}  # every invocation's rollouts are played onto the board

    @property
    def baseline(self) -> None:
        """A recording says nothing of a baseline the run was compared with."""
        return None

    def baseline_counts(self) -> None:
        return None

    def spend(self) -> Spend:
        return board_spend(self.board.total_cost_usd, self.progress())

    def servers(self) -> list[ServerView]:
        return []

    def clock(self) -> float:
        """The recording's own time, on the board's clock: what "now" means in a replay."""
        return self.board.started_at + self._origin + self._played

    # -- player controls -------------------------------------------------------------------

    def toggle_pause(self) -> None:
        self.paused = not self.paused
        self._pending_steps = 0
        self._wake.set()

    def step(self) -> None:
        """While paused: play exactly one more event."""
        self._pending_steps += 1
        self._wake.set()

    def faster(self) -> None:
        self.speed = min(self.speed * 2, 256.0)

    def slower(self) -> None:
        self.speed = max(self.speed / 2, 1 / 16)

    def step_back(self) -> None:
        """Pause, and take back the last event played: the board as it was just before it."""
        self.paused = True
        if self.position > 0:
            self.go_to(self.position - 1)

    def go_to(self, position: int) -> None:
        """The replay just after its first `position` events were played (0: none yet)."""
        position = min(max(position, 0), len(self.events))
        self._go_to(position, self._times[position - 1] if position else 0.0)

    def seek(self, seconds: float) -> None:
        """Jump to `seconds` into the recording: every event up to then played, none after."""
        seconds = min(max(seconds, 0.0), self.length)
        self._go_to(bisect.bisect_right(self._times, seconds), seconds)

    def rewind(self) -> None:
        """Back to the start: nothing played yet."""
        self.go_to(0)

    def to_end(self) -> None:
        """Every event played: the run as it ended."""
        self.go_to(len(self.events))

    def _go_to(self, position: int, played: float) -> None:
        """Play up to `position` at once (from the start again, on a new board, when that is
        behind the events played), then wait there as paused or playing as before."""
        if position < self.position:
            self.state = self._fresh_state(self.board.started_at)
            self.board = self.state.board
            self.position = 0
        for index in range(self.position, position):
            self._apply(index)
        self.position = position
        self._played = played
        self._pending_steps = 0
        self._generation += 1
        self._wake.set()

    # -- playing ---------------------------------------------------------------------------

    def _apply(self, index: int) -> None:
        """Play event `index`; after the last event of an instant, the rollouts the board
        flags stuck before the next instant go on the time line, where each crossed its
        threshold (the board's own rule: its thresholds change only at events)."""
        self.state.apply(self.events[index])
        times = self._times
        if index + 1 < len(times) and times[index + 1] == times[index]:
            return
        board = self.board
        zero = board.started_at + self._origin  # the board's clock at the recording's 0
        until = times[index + 1] if index + 1 < len(times) else times[index]
        for rollout_id in board.stuck_ids(zero + until):
            record = board.records[rollout_id]
            flag = (rollout_id, record.status)
            if flag in self._stuck_flagged:
                continue
            self._stuck_flagged.add(flag)
            crossed = record.phase_started_at + board.stuck_threshold(record.status) - zero
            marker = Marker(
                max(crossed, times[index]), MarkerKind.STUCK, "flagged stuck", rollout_id
            )
            self.timeline.mark(marker)

    async def run(self) -> None:
        """Play until the app ends: at the end of the recording, wait for a seek back."""
        while True:
            generation = self._generation
            if self.finished:
                await self._wait(generation)
                continue
            target = self._times[self.position]
            if self.paused:
                if not await self._wait_for_step_or_resume(generation):
                    continue
            elif target > self._played:
                await self._play(min(target - self._played, MAX_GAP_SEC), generation)
                if self._generation != generation:
                    continue
                if self.paused and not await self._wait_for_step_or_resume(generation):
                    continue
            self._played = max(self._played, target)
            self._apply(self.position)
            self.position += 1

    async def _wait(self, generation: int) -> None:
        """Until something happens to the player (a key, a seek)."""
        while self._generation == generation:
            self._wake.clear()
            await self._wake.wait()

    async def _wait_for_step_or_resume(self, generation: int) -> bool:
        """Hold while paused, until resumed or a step is asked for (which this uses up); False
        when a seek came first (the player starts over from where it left)."""
        while self.paused and not self._pending_steps:
            if self._generation != generation:
                return False
            self._wake.clear()
            await self._wake.wait()
        if self._generation != generation:
            return False
        if self.paused:
            self._pending_steps -= 1
        return True

    async def _play(self, seconds: float, generation: int) -> None:
        """Let `seconds` of recording time pass, in slices so pause, speed and seeks act
        promptly."""
        slice_sec = 0.05
        while seconds > 0 and not self.paused and self._generation == generation:
            played = min(seconds, slice_sec * self.speed)
            await asyncio.sleep(played / self.speed)
            if self._generation != generation:
                return
            self._played += played
            seconds -= played

    async def interrupt(self, *, cancel_in_flight: bool) -> None:
        return None

    async def close(self) -> None:
        return None

    async def submit(self, rollout: NewRollout) -> str:
        raise RuntimeError("a replay is read-only")

    async def rerun(self, rollout_id: str) -> str:
        raise RuntimeError("a replay is read-only")

    def dispatch(self) -> DispatchState | None:
        """The run's dispatch as recorded, up to the replayed moment (nothing to steer)."""
        return self.state.dispatch()

    async def pause_dispatch(self, paused: bool) -> None:
        raise RuntimeError("a replay is read-only")

    async def set_max_in_flight(self, limit: int) -> int:
        raise RuntimeError("a replay is read-only")

    async def set_budget(self, usd: float) -> None:
        raise RuntimeError("a replay is read-only")

    async def requeue(self, rollout_id: str) -> str:
        raise RuntimeError("a replay is read-only")

    async def drain(self, url: str, *, drained: bool) -> None:
        raise RuntimeError("a replay is read-only")


def _results_without_an_end(
    events: list[ReplayEvent], history: list[ItemResult]
) -> list[ReplayEvent]:
    """The journaled results that no status line of the recording ends with: counted when
    their rollout's last line was played (a deadline the run gave up at: cancelled on its
    server, untracked, failed).

    A rollout the recording never saw (its result is from before the recording, or from an
    invocation of the official tool, which records nothing: a run it resumed) is played as
    its files tell it (`attempt_of`), with its row, result and tokens, where the journal has
    it: when the result written before it was played, or at the start."""
    last_line: dict[str, float] = {}
    ended: set[str] = set()
    for event in events:
        rollout_id = getattr(event, "rollout_id", None)
        if isinstance(rollout_id, str):
            last_line[rollout_id] = event.t
        if isinstance(event, StatusSeen) and event.status.is_terminal and event.server is None:
            ended.add(event.rollout_id)
    at = min((event.t for event in events), default=0.0)
    played: list[ReplayEvent] = []
    for result in history:
        seen = last_line.get(result.rollout_id)
        if seen is None:
            played += attempt_of(result, at, at)
            continue
        at = max(at, seen)
        if result.rollout_id not in ended:
            played.append(ResultSeen(seen, result))
    return played
