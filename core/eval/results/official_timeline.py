"""The time line of a run folder without a recording: an official `osmosis eval run`'s.

osmosis-ai 0.3.8 writes no `transitions.jsonl`; its journal (`events.jsonl`) has each work
item's result but no time, and its `logs.txt` has a line for each rollout it dispatched and
each result, with their UTC times. So each rollout is played queued when it was dispatched
and finished with its result when the log says it finished; a result the log does not
mention (a folder without logs.txt) finishes its recorded `duration_ms` after the one before
it ended. A rollout dispatched without a result (cancelled, cut off by an interrupt) is
played as untracked when its work item was dispatched again, or when the log ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeGuard

from core.eval.results.folder import LOGS_FILE
from core.eval.results.logs import read_log
from core.eval.results.recording import ReplayEvent, StatusSeen, Untracked
from core.eval.results.records import ItemResult
from core.eval.untrusted_json import is_int
from core.types import RolloutStatus

# The lines of logs.txt that say when a rollout was sent and when its result came.
DISPATCHED = ("dispatch", "dispatching rollout")
FINISHED = ("result", "work item finished")

DISPATCH_KEYS = ("rollout_id", "row_index", "run_index")

_ENDS = {"success": RolloutStatus.SUCCESS, "skipped": RolloutStatus.SUCCESS}


def read_results_timeline(
    folder: Path, history: Sequence[ItemResult], warnings: list[str]
) -> list[ReplayEvent]:
    """Events for every journaled result of `folder` (its `history`, in the order written)
    and every dispatch its logs.txt tells of, in play order."""
    dispatched, finished, end = _logged_times(folder / LOGS_FILE, warnings)
    events: list[ReplayEvent] = []
    source_rows = {r.row_index: r.source_row_index for r in history}
    cursor = 0.0  # when the last result placed without a time in the log ended
    for result in history:
        duration = max(result.duration_ms, 0.0) / 1000.0
        ended = finished.get(result.rollout_id)
        if ended is None:
            ended = cursor + duration
        cursor = max(cursor, ended)
        sent = dispatched.get(result.rollout_id)
        started = max(ended - duration, 0.0) if sent is None else sent[0]
        events += attempt_of(result, started, ended)
    # Sent, never finished: followed until its item was sent again, or the log ended.
    resulted = {result.rollout_id for result in history}
    for rollout_id, (sent_at, row_index, run_index) in dispatched.items():
        if rollout_id in resulted:
            continue
        again = [
            at
            for (at, row, run) in dispatched.values()
            if (row, run) == (row_index, run_index) and at > sent_at
        ]
        row = (row_index, run_index, source_rows.get(row_index))
        events.append(_status(sent_at, rollout_id, RolloutStatus.QUEUED, row))
        events.append(Untracked(min(again, default=max(end, sent_at)), rollout_id))
    events.sort(key=lambda event: event.t)
    return events


def attempt_of(result: ItemResult, sent: float, ended: float) -> list[StatusSeen]:
    """The rollout of a journaled `result` as its files tell it: sent at `sent`, ended with
    its result's status at `ended`; nobody watched its phases (`StatusSeen.recorded`)."""
    row = (result.row_index, result.run_index, result.source_row_index)
    end_status = _ENDS.get(result.status, RolloutStatus.FAILURE)
    return [
        _status(sent, result.rollout_id, RolloutStatus.QUEUED, row),
        _status(ended, result.rollout_id, end_status, row),
    ]


def _status(
    t: float, rollout_id: str, status: RolloutStatus, row: tuple[int, int, int | None]
) -> StatusSeen:
    """`status` at `t`, for the work item `row` names (row, run, source row)."""
    row_index, run_index, source_row_index = row
    return StatusSeen(
        t=t,
        rollout_id=rollout_id,
        status=status,
        row_index=row_index,
        run_index=run_index,
        source_row_index=source_row_index,
        recorded=False,
    )


def _logged_times(
    path: Path, warnings: list[str]
) -> tuple[dict[str, tuple[float, int, int]], dict[str, float], float]:
    """From logs.txt: when each rollout was dispatched (with its row and run) and when each
    result came, in seconds since the first of them, and when the log's last line was."""
    if not path.is_file():
        return {}, {}, 0.0
    dispatched: dict[str, tuple[datetime, int, int]] = {}
    finished: dict[str, datetime] = {}
    last: datetime | None = None
    try:
        for line in read_log(path):
            last = line.at
            if line.step == DISPATCHED[0] and (details := line.details(DISPATCHED[1])):
                rollout_id, row, run = (details.get(key) for key in DISPATCH_KEYS)
                if isinstance(rollout_id, str) and _is_index(row) and _is_index(run):
                    dispatched[rollout_id] = (line.at, row, run)
            elif line.step == FINISHED[0] and (details := line.details(FINISHED[1])):
                rollout_id = details.get("rollout_id")
                if isinstance(rollout_id, str):
                    finished[rollout_id] = line.at
    except OSError as exc:
        warnings.append(f"{path}: not read ({exc.strerror or exc})")
    moments = [at for at, _row, _run in dispatched.values()] + list(finished.values())
    if not moments:
        return {}, {}, 0.0
    origin = min(moments)

    def since(at: datetime) -> float:
        return (at - origin).total_seconds()

    return (
        {rid: (since(at), row, run) for rid, (at, row, run) in dispatched.items()},
        {rid: since(at) for rid, at in finished.items()},
        since(last) if last is not None else 0.0,
    )


def _is_index(value: object) -> TypeGuard[int]:
    return is_int(value) and value >= 0
