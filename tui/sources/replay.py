"""`osmosis-tui replay RUN_DIR/transitions.jsonl`: play a recorded run back on the dashboard.

Read-only: the board is fed from the recording (and, when they sit beside it, the results
in events.jsonl), at `speed` times the recorded pace; it can be paused and stepped one
event at a time. This is for debugging phase skips after the fact; the phases a server
reported (its ownership events, recorded with `source: server`) are played as it reported
them. Progress is counted as
the live run counted it: with the run's pass threshold (from its metrics.json) and its
number of work items (from its manifest.json), when they sit beside the recording too.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from core.board import RolloutBoard
from core.eval.dispatch_gate import DispatchState
from core.eval.errors import EvalError
from core.eval.nesting import load_json
from core.eval.results.events import Journal
from core.eval.results.folder import EVENTS_FILE, MANIFEST_FILE, METRICS_FILE, PREVIEWS_DIR
from core.eval.results.manifest import work_item_count
from core.eval.results.metrics import (
    DEFAULT_PASS_THRESHOLD,
    Progress,
    progress,
    recorded_pass_threshold,
)
from core.eval.results.records import ItemResult
from core.eval.results.transitions import read_transitions
from core.phases import PHASES
from core.rollout_record import PhaseMark
from core.types import RolloutErrorCategory, RolloutResultResponse, RolloutSample, RolloutStatus
from tui.sources.base import NewRollout, RunEnding, ServerView

# Gaps longer than this in the recording (an idle resume, a long wait) are shortened.
MAX_GAP_SEC = 5.0


@dataclass(frozen=True)
class ReplayEvent:
    t: float
    rollout_id: str
    status: RolloutStatus
    row_index: int | None
    run_index: int | None
    #: The dataset's row; None in a recording of a version that did not write it.
    source_row_index: int | None
    grade: bool | None
    #: A server's report (its ownership event, PROTOCOL.md §8.1) rather than a poll's.
    server: PhaseMark | None = None


class ReplayError(EvalError):
    """The recording cannot be read (the message names the file and why)."""


def load_events(path: Path, warnings: list[str]) -> list[ReplayEvent]:
    """Status records in play order; each recorded session continues where the last ended."""
    events: list[ReplayEvent] = []
    offset = 0.0
    last = 0.0
    statuses = {status.value: status for status in RolloutStatus}
    try:
        records = list(read_transitions(path, on_warning=warnings.append))
    except OSError as exc:
        raise ReplayError(f"{path}: {exc.strerror or exc}") from exc
    for record in records:
        t = float(record["t"])
        if record["kind"] == "session":
            offset = last
            continue
        if record["kind"] != "status":
            continue
        status = statuses.get(str(record.get("status")))
        rollout_id = record.get("rollout_id")
        if status is None or not isinstance(rollout_id, str):
            warnings.append(f"{path}: skipped a status record without a known status and id")
            continue
        last = offset + t
        grade = record.get("grade")
        events.append(
            ReplayEvent(
                t=last,
                rollout_id=rollout_id,
                status=status,
                row_index=_int_or_none(record.get("row_index")),
                run_index=_int_or_none(record.get("run_index")),
                source_row_index=_int_or_none(record.get("source_row_index")),
                grade=grade if isinstance(grade, bool) else None,
                server=_server_mark(record, status) if record.get("source") == "server" else None,
            )
        )
    events.sort(key=lambda event: event.t)
    return events


def _json_beside(path: Path, name: str, warnings: list[str]) -> Any:
    """The JSON document `name` in the recording's folder; None when absent or unreadable."""
    document = path.with_name(name)
    if not document.exists():
        return None
    try:
        return load_json(document.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        warnings.append(f"{document}: not read ({exc})")
        return None


def _item_of(event: ReplayEvent) -> object:
    """The work item a recorded rollout was an attempt at (its id, when the line lacks it)."""
    if event.row_index is None or event.run_index is None:
        return event.rollout_id
    return (event.row_index, event.run_index)


def _server_mark(record: dict[str, Any], status: RolloutStatus) -> PhaseMark:
    """The server's report a line records; its `at` is set when it is played."""
    server_time: float | None = None
    text = record.get("server_time")
    if isinstance(text, str):
        with contextlib.suppress(ValueError):
            server_time = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    server_id = record.get("server_id")
    return PhaseMark(
        status,
        0.0,
        "server",
        server_time=server_time,
        event_sequence=_int_or_none(record.get("event_sequence")),
        server_id=server_id if isinstance(server_id, str) else None,
    )


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _result_of(item: ItemResult, status: RolloutStatus) -> RolloutResultResponse:
    """A terminal result rebuilt from the journal: status, reward and error type."""
    sample = RolloutSample(reward=item.reward) if item.reward is not None else None
    categories = {category.value: category for category in RolloutErrorCategory}
    category = categories.get(item.error_type or "")
    return RolloutResultResponse.model_construct(
        rollout_id=item.rollout_id,
        status=status,
        sample=sample,
        err_message=None if category else item.error_type,
        err_category=category,
    )


class ReplaySource:
    """Feeds a board from a recording; pause, step and speed are the player's controls."""

    def __init__(self, path: Path, *, speed: float = 1.0) -> None:
        self.path = path
        self.warnings: list[str] = []
        self.events = load_events(path, self.warnings)
        if not self.events:
            raise ReplayError(f"{path}: no status records to replay")
        events_file = path.with_name(EVENTS_FILE)
        self.results: dict[str, ItemResult] = {}
        if events_file.exists():
            loaded = Journal.load(events_file, on_warning=self.warnings.append)
            self.results = {item.rollout_id: item for item in loaded.values()}
        # The run's threshold is in its metrics.json; a run killed before writing one is
        # taken to have used the default (its config or flags are not recorded elsewhere).
        recorded = recorded_pass_threshold(_json_beside(path, METRICS_FILE, self.warnings))
        self.pass_threshold = DEFAULT_PASS_THRESHOLD if recorded is None else recorded
        self.board = RolloutBoard()
        self.speed = speed
        self.paused = False
        self.position = 0
        self._origin = self.events[0].t
        self._played = 0.0  # recording seconds played so far
        # Steps asked for while paused, not yet played: a step pressed before the player
        # reached its pause is kept, never lost.
        self._pending_steps = 0
        self._wake = asyncio.Event()
        self._ids = {event.rollout_id for event in self.events}
        manifest = _json_beside(path, MANIFEST_FILE, self.warnings)
        inputs = manifest.get("inputs") if isinstance(manifest, dict) else None
        counted = work_item_count(inputs) if isinstance(inputs, dict) else None
        #: The run's work items; without a manifest, the ones the recording attempted.
        self.total_items = counted if counted is not None else len(set(map(_item_of, self.events)))

    @property
    def title(self) -> str:
        return f"replay of {self.path.parent.name or self.path.name}"

    @property
    def subtitle(self) -> str:
        state = "paused" if self.paused else f"{self.speed:g}x"
        return f"{self.position}/{len(self.events)} events · {state} · {len(self._ids)} rollouts"

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
    def preview_root(self) -> Path | None:
        """The recorded run's previews, when they sit beside the recording: a replay shows
        each rollout's last preview (the files stopped changing when the run ended)."""
        previews = self.path.with_name(PREVIEWS_DIR)
        return previews if previews.is_dir() else None

    @property
    def ending(self) -> RunEnding | None:
        if not self.finished:
            return None
        return RunEnding(f"end of the recording: all {len(self.events)} events played")

    def progress(self) -> Progress:
        """The run's progress as of the replayed moment: the results of the rollouts seen
        finishing so far."""
        finished = (self.results.get(record.rollout_id) for record in self.board if record.finished)
        counts = self.board.counts(self.clock())
        return progress(
            (item for item in finished if item is not None),
            total_items=self.total_items,
            pass_threshold=self.pass_threshold,
            in_flight=sum(counts[phase.value] for phase in PHASES),
            stuck=counts["stuck"],
        )

    def servers(self) -> list[ServerView]:
        return []

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

    def clock(self) -> float:
        """The recording's own time, on the board's clock: what "now" means in a replay."""
        return self.board.started_at + self._origin + self._played

    async def run(self) -> None:
        for index, event in enumerate(self.events):
            target = event.t - self._origin
            gap = target - self._played
            if self.paused:
                await self._wait_for_step_or_resume()
            elif gap > 0:
                await self._play(min(gap, MAX_GAP_SEC))
            self._played = target
            self._apply(event)
            self.position = index + 1

    async def _wait_for_step_or_resume(self) -> None:
        """Hold while paused, until resumed or a step is asked for (which this uses up)."""
        while self.paused and not self._pending_steps:
            self._wake.clear()
            await self._wake.wait()
        if self.paused:
            self._pending_steps -= 1

    async def _play(self, seconds: float) -> None:
        """Let `seconds` of recording time pass, in slices so pause and speed act promptly."""
        slice_sec = 0.05
        while seconds > 0 and not self.paused:
            played = min(seconds, slice_sec * self.speed)
            await asyncio.sleep(played / self.speed)
            self._played += played
            seconds -= played
        if self.paused:
            await self._wait_for_step_or_resume()

    def _apply(self, event: ReplayEvent) -> None:
        at = self.board.started_at + event.t
        if event.server is not None:
            self.board.server_mark(event.rollout_id, replace(event.server, at=at))
            return
        item = self.results.get(event.rollout_id)
        result = _result_of(item, event.status) if item and event.status.is_terminal else None
        source_row_index = event.source_row_index
        if source_row_index is None and item is not None:
            source_row_index = item.source_row_index  # an older recording: the journal's word
        self.board.observe(
            event.rollout_id,
            event.status,
            at,
            row_index=event.row_index,
            run_index=event.run_index,
            source_row_index=source_row_index,
            grade=event.grade,
            result=result,
        )

    async def interrupt(self, *, cancel_in_flight: bool) -> None:
        return None

    async def close(self) -> None:
        return None

    async def submit(self, rollout: NewRollout) -> str:
        raise RuntimeError("a replay is read-only")

    async def rerun(self, rollout_id: str) -> str:
        raise RuntimeError("a replay is read-only")

    def dispatch(self) -> DispatchState | None:
        return None

    def pause_dispatch(self, paused: bool) -> None:
        raise RuntimeError("a replay is read-only")

    def set_max_in_flight(self, limit: int) -> int:
        raise RuntimeError("a replay is read-only")

    def requeue(self, rollout_id: str) -> str:
        raise RuntimeError("a replay is read-only")
