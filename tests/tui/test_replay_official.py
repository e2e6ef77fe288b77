"""A replay of a run folder without a recording: an official `osmosis eval run`'s (osmosis-ai
0.3.8 writes no transitions.jsonl), with its results at the times its logs.txt says.

The folder is written by hand, file for file as the official tool writes it
(OFFICIAL_RESULTS_SPEC.md §9, §12, §15, §17): a first invocation in which one item failed
and one was cut off by an interrupt, then a `--retry-failed` invocation three minutes later.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from core.eval.results.export import export_row
from core.types import RolloutStatus
from tests.eval.runs.command import run_osmosis
from tests.tui.helpers import SIZE, details_text, text_of, until
from tests.tui.recordings import numbers, played_to_the_end, replay_app, write_recording
from tui.app import DashboardApp
from tui.screens.transcript import TranscriptScreen
from tui.sources.replay import ReplaySource

FAILED, OK0, OK1, CUT, OK2, SKIPPED = (f"{n:x>32}" for n in ("a0", "b0", "c1", "d2", "e2", "f3"))


def canonical(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def result(rid: str, row: int, status: str, duration_ms: float, **more: Any) -> dict[str, Any]:
    return {"duration_ms": duration_ms, "rollout_id": rid, "row_index": row, "run_index": 0,
            "source_row_index": row + 2, "status": status, **more}  # fmt: skip


def log(stamp: str, step: str, message: str, details: dict[str, Any] | None = None) -> str:
    level = "WARNING" if step == "cancel" else "INFO"
    suffix = f" {canonical(details)}" if details is not None else ""
    return f"2026-12-01T{stamp}Z {level} [{step}] {message}{suffix}\n"


def dispatched(stamp: str, rid: str, row: int) -> str:
    return log(stamp, "dispatch", "dispatching rollout",
               {"rollout_id": rid, "row_index": row, "run_index": 0})  # fmt: skip


def finished(stamp: str, rid: str, row: int, status: str, reward: float | None) -> str:
    return log(stamp, "result", "work item finished",
               {"reward": reward, "rollout_id": rid, "row_index": row, "run_index": 0,
                "status": status})  # fmt: skip


def official_run(folder: Path, *, logs: bool = True) -> Path:
    folder.mkdir(parents=True)
    manifest = {
        "schema_version": 1,
        "local_run_id": "c457393d3c8741fe9851ab8008f74f18",
        "run_name": folder.name,
        "created_at": "2026-12-01T08:46:54.155727Z",
        "inputs": {
            "model_path": "openai/stub-model",
            "dataset": {"sha256": "e" * 64, "selected_source_rows": "2-5"},
            "n": 1,
            "rollout": {"name": "demo", "entrypoint": "main.py", "source_digest": "8" * 64},
            "env": {},
            "secret_names": [],
            "timeouts": {"agent_timeout_sec": 60.0, "grader_timeout_sec": 30.0},
            "versions": {"rollout_protocol": "0.4", "dataset_normalization": 1, "state_schema": 1},
        },
        "provenance": {"sdk_version": "0.3.8", "config_path": "configs/eval/demo.toml"},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    journal = [
        result(FAILED, 0, "failed", 203.19, error_type="agent_error"),
        result(OK1, 1, "success", 237.0, reward=0.25, tokens=13),
        result(SKIPPED, 3, "skipped", 100.0, tokens=13),
        result(OK2, 2, "success", 200.0, reward=1.0),
        result(OK0, 0, "success", 300.0, reward=1.0),
    ]
    (folder / "events.jsonl").write_text("".join(canonical(r) + "\n" for r in journal))
    summary = {
        "total_samples": 4, "completed_samples": 3, "graded": 3, "passed": 2, "failed": 0,
        "skipped": 1, "pass_rate": 2 / 3, "pass_threshold": 0.5, "tokens_used": 26,
        "reward_stats": {"mean": 0.75, "median": 1.0, "std": 0.3535533905932738, "min": 0.25,
                         "max": 1.0},
    }  # fmt: skip
    metrics = {
        "eval_run": {"id": manifest["local_run_id"], "status": "finished"},
        "summary": summary,
    }
    (folder / "metrics.json").write_text(json.dumps(metrics, indent=2))
    if logs:
        (folder / "logs.txt").write_text(
            log("08:46:54.163598", "run", f"{folder.name}: 4 of 4 work items pending")
            + log("08:47:01.512119", "schedule", "running 4 work items, up to 4 in flight")
            + dispatched("08:47:01.513000", FAILED, 0)
            + dispatched("08:47:01.513000", OK1, 1)
            + dispatched("08:47:01.600000", CUT, 2)
            + dispatched("08:47:01.700000", SKIPPED, 3)
            + finished("08:47:01.716190", FAILED, 0, "failed", None)
            + finished("08:47:01.750000", OK1, 1, "success", 0.25)
            + finished("08:47:01.800000", SKIPPED, 3, "skipped", None)
            + log("08:47:01.900000", "cancel", "supervisor cancellation requested")
            + log("08:49:59.000000", "run", f"{folder.name}: 2 of 4 work items pending")
            + dispatched("08:50:00.000000", OK2, 2)
            + dispatched("08:50:00.000000", OK0, 0)
            + finished("08:50:00.200000", OK2, 2, "success", 1.0)
            + finished("08:50:00.300000", OK0, 0, "success", 1.0)
        )
    return folder


def test_an_official_run_folder_replays_each_result_at_its_logged_time(tmp_path: Path) -> None:
    folder = official_run(tmp_path / "r1")
    source = played_to_the_end(folder)
    board = source.board
    statuses = {rid: (r.display_status, r.untracked) for rid, r in board.records.items()}
    assert statuses == {
        FAILED: ("failure", False),
        OK1: ("success", False),
        CUT: ("queued", True),  # cut off by the interrupt: followed until it was sent again
        SKIPPED: ("success", False),
        OK2: ("success", False),
        OK0: ("success", False),
    }
    summary = json.loads((folder / "metrics.json").read_text())["summary"]
    assert numbers(source.progress()) == {
        "done": summary["total_samples"],
        "total": 4,
        "passed": summary["passed"],
        "completed": summary["completed_samples"],
        "pass_rate": summary["pass_rate"],  # at the run's threshold, 0.5
        "mean_reward": pytest.approx(summary["reward_stats"]["mean"]),
        "graded": summary["graded"],
        "in_flight": 0,
        "stuck": 0,
        "not_dispatched": 0,
    }
    t0 = board.started_at
    ok1 = board.records[OK1]
    assert ok1.source_row_index == 3  # the dataset's row, as the journal says
    assert ok1.submitted_at - t0 == pytest.approx(0.0)
    assert ok1.terminal_at is not None and ok1.terminal_at - t0 == pytest.approx(0.237)
    untracked_at = 178.487  # when its item was sent again, in the second invocation
    assert source.length == pytest.approx(untracked_at + 0.3)
    assert board.records[CUT].source_row_index == 4  # from its row's other attempt
    # No model call was recorded: each rollout's tokens are its result's, as metrics.json sums.
    assert board.total_tokens == summary["tokens_used"] == 26
    assert (board.records[OK1].model.tokens, board.records[SKIPPED].model.tokens) == (13, 13)
    failed = board.records[FAILED].latest_result
    assert failed is not None and failed.err_category is not None  # agent_error
    # Partway: the first invocation's results, and the rollout it was cut off with in flight.
    source.seek(1.0)
    assert (source.progress().done, source.progress().in_flight) == (3, 1)
    assert board.records[CUT].status is RolloutStatus.QUEUED
    assert source.warnings == []


def test_without_its_logs_each_result_follows_the_one_before(tmp_path: Path) -> None:
    source = played_to_the_end(official_run(tmp_path / "r1", logs=False))
    board = source.board
    assert len(board) == 5  # what never finished is in no file but logs.txt
    ends = sorted((r.terminal_at or 0) - board.started_at for r in board)
    assert ends == pytest.approx([0.20319, 0.44019, 0.54019, 0.74019, 1.04019])
    assert source.progress().pass_rate == pytest.approx(2 / 3)


async def test_an_official_run_on_the_dashboard(tmp_path: Path) -> None:
    app, _source = replay_app(official_run(tmp_path / "r1"), speed=256)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "end of recording" in text_of(app.end_banner), timeout=20)
        assert app.end_banner.has_class("-complete")  # every work item has its result
        await until(pilot, lambda: "4/4  pass 66.7%  mean reward 0.750" in text_of(app.summary))
        assert "tokens 26" in text_of(app.summary)
        assert len(app.table.order) == 6


async def test_the_details_say_which_phases_no_file_records(tmp_path: Path) -> None:
    """Neither events.jsonl nor logs.txt says when a rollout of an official run was queued,
    running or grading: the details say so, with no poll time made up for them."""
    app, _source = replay_app(official_run(tmp_path / "r1"), speed=256)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "end of recording" in text_of(app.end_banner), timeout=20)
        app.table.move_cursor_to(OK1)
        await pilot.press("enter")
        await until(pilot, lambda: OK1 in details_text(app))
        text = details_text(app)
        phases = text[text.index("phase ") : text.index("result")]
        assert phases.count("not recorded") == 3  # queued, running and grading
        assert "happened unseen" not in phases and "poll" not in phases
        assert "+0.237s" in phases  # its result's time, as logs.txt says


def test_the_export_has_no_time_for_a_phase_not_recorded(tmp_path: Path) -> None:
    source = played_to_the_end(official_run(tmp_path / "r1"))
    row = export_row(source.board.records[OK1], source.board.started_at)
    assert row["observed"] == "success@0.237"  # the result's time, as logs.txt says
    assert row["skipped"] == "queued:not_recorded running:not_recorded grading:not_recorded"


def test_the_command_takes_a_run_folder_and_says_what_it_cannot_replay(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()

    def replay(path: Path) -> subprocess.CompletedProcess[str]:
        return run_osmosis("replay", str(path), cwd=tmp_path)

    empty = replay(tmp_path / "empty")
    assert empty.returncode == 2
    assert f"{tmp_path / 'empty'}: no rollout to replay" in empty.stderr
    missing = replay(tmp_path / "nowhere")
    assert missing.returncode == 2
    assert f"{tmp_path / 'nowhere'}: no such file or folder" in missing.stderr
    assert ReplaySource(official_run(tmp_path / "r1")).recording is None


def trajectory(rollout_id: str) -> dict[str, Any]:
    """An ATIF document as a rollout server leaves it for a finished attempt."""
    return {
        "schema_version": "ATIF-v1.4",
        "session_id": rollout_id,
        "agent": {"name": "demo", "version": "0.3.8"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "What is 3 * 7?"},
            {"step_id": 2, "source": "agent", "message": "The product is 21."},
        ],
        "final_metrics": {"total_prompt_tokens": 9, "total_completion_tokens": 4},
        "extra": {"osmosis": {"rollout_id": rollout_id}},
    }


async def test_t_shows_a_finished_rollouts_trajectory_from_the_run_folder(
    tmp_path: Path,
) -> None:
    """The official result carries no messages: the conversation is the trajectory the server
    left in `rollout_trials/<rollout_id>/` (copied to `trajectories/row_R_run_K.json`)."""
    folder = official_run(tmp_path / "r1")
    trial = folder / "rollout_trials" / OK1
    trial.mkdir(parents=True)
    (trial / "trajectory.json").write_text(json.dumps(trajectory(OK1)))
    app, _source = replay_app(folder, speed=256)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "end of recording" in text_of(app.end_banner), timeout=20)
        app.table.move_cursor_to(OK1)
        await pilot.press("t")
        assert isinstance(app.screen, TranscriptScreen)
        await until(pilot, lambda: "The product is 21." in text_of(steps_of(app)))
        header = text_of(app.screen.query_one("#transcript-header", Static))
        assert "trajectory the server left" in header and "2 steps" in header
        assert "What is 3 * 7?" in text_of(steps_of(app))


def steps_of(app: DashboardApp) -> Static:
    return app.screen.query_one("#transcript-steps", Static)


def resumed_by_the_official_tool(folder: Path) -> Path:
    """A run of ours (its recording) that the official tool resumed: its journal holds the
    results of the official invocation too, which no line of the recording tells of."""
    official_run(folder, logs=False)  # its manifest: rows 2-5
    write_recording(folder, [(0.0, OK1, 1, "queued"), (0.5, OK1, 1, "success")])
    call = {"kind": "model_call", "call_id": 1, "rollout_id": OK1, "t": 0.3,
            "started_at": "2026-03-01T12:00:00.200000Z", "latency_s": 0.1, "status": 200,
            "streamed": False, "model": "stub", "prompt_tokens": 11, "completion_tokens": 2,
            "total_tokens": 13, "request": "What is 6 * 7?", "reply": "42"}  # fmt: skip
    (folder / "calls.jsonl").write_text(canonical(call) + "\n")
    journal = [
        result(OK1, 1, "success", 500.0, reward=0.25, tokens=13),
        result(FAILED, 0, "failed", 203.19, error_type="agent_error"),
        result(OK2, 2, "success", 200.0, reward=1.0, tokens=9),
    ]
    (folder / "events.jsonl").write_text("".join(canonical(r) + "\n" for r in journal))
    summary = {"total_samples": 3, "pass_threshold": 0.5, "tokens_used": 22}
    (folder / "metrics.json").write_text(json.dumps({"summary": summary}))
    return folder


async def test_a_run_the_official_tool_resumed_shows_every_result(tmp_path: Path) -> None:
    """The rows and tokens are the journal's, as metrics.json counts them, not only those of
    the invocations that recorded their rollouts' phases."""
    folder = resumed_by_the_official_tool(tmp_path / "r1")
    app, source = replay_app(folder, speed=256)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "end of recording" in text_of(app.end_banner), timeout=20)
        await until(pilot, lambda: "3/4  pass 33.3%" in text_of(app.summary))
        assert "tokens 22" in text_of(app.summary)
        assert len(app.table.order) == 3
        board = source.board
        statuses = {rid: r.display_status for rid, r in board.records.items()}
        assert statuses == {OK1: "success", FAILED: "failure", OK2: "success"}
        assert board.records[OK2].model.tokens == 9
        # Ours keeps the phases its recording tells (its model call proves running).
        assert board.records[OK1].skipped_phases() == {RolloutStatus.GRADING: "not_observed"}
        app.table.move_cursor_to(OK2)
        await pilot.press("enter")
        await until(pilot, lambda: OK2 in details_text(app))
        text = details_text(app)
        phases = text[text.index("phase ") : text.index("result")]
        assert phases.count("not recorded") == 3
        assert "reward  1.00" in text or "reward  1.0" in text
