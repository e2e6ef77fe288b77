"""Helpers for the replay tests: recordings and run folders written by hand in the documented
formats, the replay app over them, and what a replayed board holds, to compare two boards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.eval.results.metrics import Progress
from tui.app import DashboardApp, create_app
from tui.sources.replay import ReplaySource

#: Two rollouts, seconds apart: b is seen queued then done (running and grading between two
#: polls: not observed), a in every phase.
SLOW = [
    (0.0, "a" * 32, 0, "queued"),
    (0.05, "b" * 32, 1, "queued"),
    (3.0, "a" * 32, 0, "running"),
    (4.0, "b" * 32, 1, "success"),
    (6.0, "a" * 32, 0, "grading"),
    (8.0, "a" * 32, 0, "success"),
]


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def write_recording(folder: Path, statuses: list[tuple[float, str, int, str]]) -> Path:
    """A transitions.jsonl in the documented format: a session line, then status lines."""
    lines: list[dict[str, Any]] = [
        {"kind": "session", "t": 0.0, "started_at": "2026-03-01T12:00:00Z"}
    ]
    for t, rollout_id, row_index, status in statuses:
        lines.append(
            {
                "kind": "status",
                "rollout_id": rollout_id,
                "row_index": row_index,
                "run_index": 0,
                "source_row_index": row_index,  # every row of the dataset
                "status": status,
                "t": t,
            }
        )
    return write_jsonl(folder / "transitions.jsonl", lines)


def replay_app(path: Path, speed: float = 1.0) -> tuple[DashboardApp, ReplaySource]:
    source = ReplaySource(path, speed=speed)
    return create_app(source, clock=source.clock, export_dir=source.folder), source


def played_to_the_end(path: Path) -> ReplaySource:
    """A replay of `path` with every event played at once (no app, no waiting)."""
    source = ReplaySource(path)
    source.to_end()
    return source


def numbers(progress: Progress) -> dict[str, Any]:
    """What the summary strip shows of a run's progress."""
    return {
        "done": progress.done,
        "total": progress.total,
        "passed": progress.passed,
        "completed": progress.completed,
        "pass_rate": progress.pass_rate,
        "mean_reward": progress.mean_reward,
        "graded": progress.rewards_count,
        "in_flight": progress.in_flight,
        "stuck": progress.stuck,
        "not_dispatched": progress.not_dispatched,
    }


def board_state(source: ReplaySource) -> dict[str, Any]:
    """Everything a replayed board shows, times counted from the board's start (two replays
    of one recording have boards started at different moments)."""
    board = source.board
    t0 = board.started_at

    def since(at: float | None) -> float | None:
        return None if at is None else round(at - t0, 6)

    records = {}
    for record in board:
        result = record.latest_result
        activity = record.model
        records[record.rollout_id] = {
            "status": record.display_status,
            "rows": (record.row_index, record.run_index, record.source_row_index),
            "grade": record.grade,
            "untracked": record.untracked,
            "submitted": since(record.submitted_at),
            "transitions": [(t.status.value, since(t.at)) for t in record.transitions],
            "marks": [
                (m.status.value, since(m.at), m.source, m.server_time, m.event_sequence)
                for m in record.timeline()
            ],
            "cancels": [
                (since(c.requested_at), c.disposition, c.error, since(c.answered_at))
                for c in record.cancels
            ],
            "model": (activity.calls, activity.failed, activity.tokens, sorted(activity.in_flight)),
            "result": None
            if result is None
            else (result.status.value, result.sample and result.sample.reward, result.err_message),
        }
    now = source.clock()
    return {
        "records": records,
        "order": list(board.records),
        "counts": dict(board.counts(now)),
        "tokens": (board.total_tokens, board.total_cost_usd, board.model_calls),
        "failures": dict(board.failures_by_category()),
        "progress": numbers(source.progress()),
        "notes": list(source.notes),
        "dispatch": (source.state.dispatch_paused, source.state.max_in_flight),
        "played": (source.position, source.played),
    }


A, B, C, D, D2, B2, M, OLD = (f"{name:x<32}" for name in ("a", "b", "c", "d", "d2", "b2", "m", "o"))


def write_steered_run(folder: Path) -> Path:
    """A run folder of two invocations with a line of every kind: phases a server reported,
    a cancel, an untrack, a rollout sent by hand, a requeue, dispatch paused, resumed and
    limited, model calls, a line of a kind from a later version, and a result from before
    the recording. Six work items (rows 0-5; row 5 is never sent); threshold 0.5 (in the
    manifest only)."""

    def status(t: float, rid: str, row: int | None, value: str, **more: Any) -> dict[str, Any]:
        line = {"kind": "status", "rollout_id": rid, "status": value, "t": t, **more}
        if row is not None:
            line.update(row_index=row, run_index=0, source_row_index=row + 10)
        return line

    def cancel(t: float, rid: str, row: int, **answer: Any) -> dict[str, Any]:
        return {"kind": "cancel_request", "rollout_id": rid, "row_index": row, "run_index": 0,
                "t": t, **answer}  # fmt: skip

    server = {"source": "server", "server_id": "host-a"}
    transitions = [
        {"kind": "session", "t": 0.0, "started_at": "2026-03-01T12:00:00Z"},
        status(0.0, A, 0, "queued", grade=True),
        status(0.1, B, 1, "queued", grade=True),
        status(0.2, C, 2, "queued", grade=True),
        status(0.2, D, 3, "queued", grade=True),
        status(0.3, C, 2, "running"),
        status(0.3, D, 3, "running"),
        status(0.4, B, 1, "running"),
        status(
            0.5, A, 0, "running", server_time="2026-03-01T12:00:00.5Z", event_sequence=1, **server
        ),
        status(0.6, A, 0, "running"),
        status(0.7, M, None, "queued", grade=False),
        {"kind": "manual", "rollout_id": M, "t": 0.7},
        cancel(0.8, B, 1),
        cancel(0.8, B, 1, disposition="cancelled_running", reply_t=0.9),
        status(1.0, B, 1, "cancelled"),
        status(
            1.0, A, 0, "grading", server_time="2026-03-01T12:00:01Z", event_sequence=2, **server
        ),
        {"kind": "untrack", "rollout_id": C, "row_index": 2, "run_index": 0, "t": 1.1},
        status(1.2, A, 0, "success"),
        status(1.3, M, None, "success"),
        {
            "kind": "requeue",
            "rollout_id": D,
            "new_rollout_id": D2,
            "row_index": 3,
            "run_index": 0,
            "t": 1.4,
        },
        cancel(1.4, D, 3),
        cancel(1.4, D, 3, disposition="cancelled_running", reply_t=1.45),
        status(1.5, D, 3, "cancelled"),
        {"kind": "control", "action": "pause", "t": 1.6},
        {"kind": "from_a_later_version", "t": 1.6, "what": "anything"},
        {"kind": "session", "t": 0.0, "started_at": "2026-03-01T12:10:00Z"},
        {"kind": "control", "action": "resume", "t": 0.1},
        {"kind": "control", "action": "max_in_flight", "value": 2, "t": 0.1},
        status(0.2, D2, 3, "queued", grade=True),
        status(0.2, B2, 1, "queued", grade=True),
        status(0.5, D2, 3, "success"),
        status(0.6, B2, 1, "failure"),
    ]
    path = write_jsonl(folder / "transitions.jsonl", transitions)

    def call(call_id: int, rid: str, t: float, latency: float, tokens: int) -> dict[str, Any]:
        return {"kind": "model_call", "call_id": call_id, "rollout_id": rid, "t": t,
                "started_at": "2026-03-01T12:00:00.550000Z", "latency_s": latency,
                "status": 200, "streamed": False, "model": "stub", "prompt_tokens": tokens - 2,
                "completion_tokens": 2, "total_tokens": tokens, "request": "What is 6 * 7?",
                "reply": "42"}  # fmt: skip

    # In the order the calls ended; d2's `t` counts from the second session's start.
    write_jsonl(folder / "calls.jsonl", [call(1, A, 0.55, 0.2, 10), call(2, M, 0.8, 0.1, 5),
                                          call(1, D2, 0.3, 0.1, 7)])  # fmt: skip

    def result(rid: str, row: int, value: str, **more: Any) -> dict[str, Any]:
        return {"duration_ms": 500.0, "rollout_id": rid, "row_index": row, "run_index": 0,
                "source_row_index": row + 10, "status": value, **more}  # fmt: skip

    write_jsonl(
        folder / "events.jsonl",
        [
            result(OLD, 4, "success", reward=1.0, tokens=3),  # before the recording
            result(A, 0, "success", reward=1.0, tokens=10),
            result(D2, 3, "success", reward=0.5, tokens=7),
            result(B2, 1, "failed", error_type="agent_error"),
        ],
    )
    manifest = {
        "schema_version": 1,
        "run_name": folder.name,
        "inputs": {"dataset": {"sha256": "0" * 64, "selected_source_rows": "10-15"}, "n": 1},
        "provenance": {"sdk_version": "0.3.8", "pass_threshold": 0.5},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return path
