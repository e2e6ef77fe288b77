"""Fixed states for the timeline's tests and snapshots: a recorded run written by a small,
deterministic dispatcher (two servers, a limit raised, a pause, a lowered limit, failures,
a cancel, an untrack, a rollout sent by hand, one never admitted, model calls answered 429),
and a live board with rollouts on two servers for the live dashboard's timeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.board import RolloutBoard
from core.eval.dispatch_gate import DispatchState
from core.rollout_record import CancelRequest
from core.types import RolloutStatus
from tests.tui.recordings import write_jsonl
from tests.tui.states import NOW, SERVER, T0, StaticSource, _add, rollout_id
from tui.sources.base import ServerView

#: Seconds each rollout takes, in turn; the long one is the stuck-looking tail.
DURATIONS = (6.0, 9.0, 4.0, 12.0, 7.0, 5.0, 31.0, 8.0)
ROLLOUTS = 24
#: (t, action, value) of the dispatch's steering.
STEERING = ((20.0, "max_in_flight", 6), (40.0, "pause", None), (50.0, "resume", None),
            (60.0, "max_in_flight", 3))  # fmt: skip
HOSTS = ("host-a", "host-b")
MANUAL = "m" * 32
NOT_ADMITTED = "n" * 32


def rid(n: int) -> str:
    return f"{n:02d}".ljust(32, "r")


def _outcome(n: int) -> str:
    return "failure" if n % 5 == 4 else "success"


def write_timeline_run(folder: Path) -> Path:
    """A run folder whose recording a small dispatcher wrote: at most the limit in flight,
    none sent while paused; returns its transitions.jsonl."""
    lines: list[dict[str, Any]] = [
        {"kind": "session", "t": 0.0, "started_at": "2026-03-01T12:00:00Z"},
        {"kind": "dispatch", "max_in_flight": 4, "t": 0.0},
    ]
    calls: list[dict[str, Any]] = []

    def status(t: float, n: int, value: str, **more: Any) -> None:
        lines.append({"kind": "status", "rollout_id": rid(n), "row_index": n, "run_index": 0,
                      "source_row_index": n, "status": value, "t": t, **more})  # fmt: skip

    limit, paused, sent, t = 4, False, 0, 0.0
    ends: dict[int, float] = {}
    steering = list(STEERING)
    while sent < ROLLOUTS or ends:
        while steering and steering[0][0] <= t:
            at, action, value = steering.pop(0)
            lines.append({"kind": "control", "action": action, "t": at,
                          **({"value": value} if value is not None else {})})  # fmt: skip
            if action == "max_in_flight" and value is not None:
                limit = value
            else:
                paused = action == "pause"
        for n, end in sorted(ends.items()):
            if end <= t:
                del ends[n]
                if n == 9:  # cancelled from the dashboard a second before it ended
                    answer = {"disposition": "cancelled_running", "reply_t": end - 0.9}
                    lines.append({"kind": "cancel_request", "rollout_id": rid(n), "row_index": n,
                                  "run_index": 0, "t": end - 1.0, **answer})  # fmt: skip
                    status(end, n, "cancelled")
                elif n == 13:
                    lines.append({"kind": "untrack", "rollout_id": rid(n), "row_index": n,
                                  "run_index": 0, "t": end})  # fmt: skip
                else:
                    status(end, n, _outcome(n))
        while not paused and sent < ROLLOUTS and len(ends) < limit:
            n = sent
            sent += 1
            host = HOSTS[n % 2]
            status(t, n, "queued", grade=True)
            status(t + 0.5, n, "running", source="server", server_id=host,
                   server_time="2026-03-01T12:00:00Z", event_sequence=n)  # fmt: skip
            ends[n] = t + DURATIONS[n % len(DURATIONS)]
            if n % 7 == 3:  # the model refused one call for its rate
                calls.append({"kind": "model_call", "call_id": n, "rollout_id": rid(n),
                              "t": t + 1.0, "started_at": "2026-03-01T12:00:01Z",
                              "latency_s": 0.2, "status": 429, "streamed": False,
                              "model": "stub", "request": "6 * 7?"})  # fmt: skip
        if t == 44.0:  # sent by hand while dispatch was paused, and one never admitted
            lines.append({"kind": "status", "rollout_id": MANUAL, "status": "queued", "t": t,
                          "grade": False})  # fmt: skip
            lines.append({"kind": "manual", "rollout_id": MANUAL, "t": t})
            lines.append({"kind": "status", "rollout_id": MANUAL, "status": "success",
                          "t": t + 3.0})  # fmt: skip
            lines.append({"kind": "not_admitted", "rollout_id": NOT_ADMITTED, "row_index": 0,
                          "run_index": 1, "t": t, "error": "503 Service Unavailable"})  # fmt: skip
        t += 0.5
    lines.sort(key=lambda line: line["t"])  # stable: one instant's lines keep their order
    path = write_jsonl(folder / "transitions.jsonl", lines)
    write_jsonl(folder / "calls.jsonl", calls)
    return path


def live_timeline_source() -> StaticSource:
    """A live run 95 s in: rollouts on two servers (one of them down now), finished ones of
    every outcome, one untracked, one cancelled, one sent by hand, and the limit at 4."""
    board = RolloutBoard(stuck_after_sec=20.0)
    board.started_at = T0
    other = "http://127.0.0.1:8440"
    Q, R, OK, FAIL = (RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.SUCCESS,
                      RolloutStatus.FAILURE)  # fmt: skip
    for n in range(10):
        start = n * 8.0
        end = start + DURATIONS[n % len(DURATIONS)]
        steps = [(Q, start), (R, start + 0.5)]
        if n < 8:
            steps.append((FAIL if n % 5 == 4 else OK, end))
        record = _add(board, n, n, steps)
        record.server = SERVER if n % 2 else other
    for n in (8, 9):  # in flight since long before: 9 is flagged stuck
        board.records[rollout_id(n)].server = SERVER
    board.stop_tracking([rollout_id(8)], at=T0 + 90.0)
    cancelled = _add(board, 10, 10, [(Q, 30.0), (R, 31.0), (RolloutStatus.CANCELLED, 36.0)])
    cancelled.cancels += (CancelRequest(T0 + 35.0, "cancelled_running", answered_at=T0 + 36.0),)
    manual = _add(board, 11, 11, [(Q, 50.0), (R, 50.5), (OK, 58.0)])
    manual.manual = True
    board.take_changes()
    return TimelineSource(
        board,
        total=12,
        server_states=[ServerView(SERVER, "accepting"), ServerView(other, "down", restarts=1)],
    )


class TimelineSource(StaticSource):
    """A static source whose run has a limit: the timeline draws its line."""

    def dispatch(self) -> DispatchState | None:
        return DispatchState(paused=False, max_in_flight=4, in_flight=2)


__all__ = ["NOW", "live_timeline_source", "write_timeline_run"]
