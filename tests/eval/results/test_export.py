"""The dashboard export (`e`), written headless: what each row holds, and who may read it."""

from __future__ import annotations

import csv
import json
import os
import stat
from pathlib import Path

from core.board import RolloutBoard
from core.eval.results.export import EXPORT_FIELDS, FILE_PREFIX, write_export
from core.types import RolloutErrorCategory, RolloutResultResponse, RolloutSample, RolloutStatus

T0 = 1_000.0


def board() -> RolloutBoard:
    """A graded success, an early failure, and a rollout the server never admitted."""
    board = RolloutBoard()
    board.started_at = T0
    ok, failed = "a" * 32, "b" * 32
    board.observe(ok, RolloutStatus.QUEUED, T0 + 0.5, row_index=0, run_index=0)
    board.observe(ok, RolloutStatus.RUNNING, T0 + 1.0)
    board.observe(ok, RolloutStatus.GRADING, T0 + 2.0)
    board.observe(
        ok,
        RolloutStatus.SUCCESS,
        T0 + 2.25,
        result=RolloutResultResponse(
            rollout_id=ok,
            status=RolloutStatus.SUCCESS,
            sample=RolloutSample(messages=[], label="42", reward=1.0),
        ),
    )
    board.observe(failed, RolloutStatus.QUEUED, T0 + 1.0, row_index=1, run_index=0)
    board.observe(
        failed,
        RolloutStatus.FAILURE,
        T0 + 3.0,
        result=RolloutResultResponse(
            rollout_id=failed,
            status=RolloutStatus.FAILURE,
            err_message="the agent raised",
            err_category=RolloutErrorCategory.AGENT_ERROR,
        ),
    )
    board.record_not_admitted("c" * 32, "POST /rollout returned 422", row_index=2, run_index=0)
    return board


def test_the_export_writes_each_rollout_to_jsonl_and_csv(tmp_path: Path) -> None:
    source = board()
    base, count = write_export(tmp_path, source, T0)
    assert count == 3
    assert base.parent == tmp_path and base.name.startswith(FILE_PREFIX)
    lines = [json.loads(line) for line in base.with_suffix(".jsonl").read_text().splitlines()]
    assert [list(line) for line in lines] == [list(EXPORT_FIELDS)] * 3
    ok, failed, refused = lines
    assert ok["status"] == "success" and ok["reward"] == 1.0 and ok["err_category"] is None
    assert ok["observed"] == "queued@0.500 running@1.000 grading@2.000 success@2.250"
    assert ok["skipped"] == ""
    assert failed["status"] == "failure" and failed["err_category"] == "agent_error"
    assert failed["err_message"] == "the agent raised"
    assert failed["skipped"] == "running:not_observed grading:ended_early"
    assert refused["status"] == "not_admitted"
    assert refused["err_message"] == "POST /rollout returned 422"
    with base.with_suffix(".csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["rollout_id"] for row in rows] == [line["rollout_id"] for line in lines]
    assert list(rows[0]) == list(EXPORT_FIELDS)
    assert rows[1]["err_category"] == "agent_error" and rows[0]["err_category"] == ""


def test_the_export_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)  # the most permissive a user could have
    try:
        base, _count = write_export(tmp_path, board(), T0)
    finally:
        os.umask(previous)
    modes = {stat.S_IMODE(base.with_suffix(s).stat().st_mode) for s in (".jsonl", ".csv")}
    assert modes == {0o600}
