"""Helpers shared by the results-folder tests: a sample result, official manifest inputs, an
official trajectory and a file's mode bits."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from core.eval.results.records import ItemResult


def file_mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def item_result(row: int = 0, run: int = 0, **fields: Any) -> ItemResult:
    values: dict[str, Any] = {
        "row_index": row,
        "run_index": run,
        "rollout_id": f"id-{row}-{run}",
        "status": "success",
        "source_row_index": row + 10,
        "reward": 1.0,
        "tokens": 42,
        "duration_ms": 1234,
    }
    values.update(fields)
    return ItemResult(**values)


def official_inputs(**changes: Any) -> dict[str, Any]:
    """The `inputs` of an official manifest (run `r1` of osmosis eval run 0.3.8)."""
    inputs: dict[str, Any] = {
        "model_path": "openai/stub-model",
        "dataset": {
            "sha256": "e2d2a94a26b588e65e42002e409db592903717a4e77a6b997013ddef1af02409",
            "selected_source_rows": "0-4",
        },
        "n": 1,
        "rollout": {
            "name": "demo",
            "entrypoint": "main.py",
            "source_digest": "8a2abcc7099e41ef3a0d42d706a84dea5820948d52f6995bbae5baf722678659",
        },
        "env": {"DEMO_SLOW_SEC": "3"},
        "secret_names": [],
        "timeouts": {"agent_timeout_sec": 60.0, "grader_timeout_sec": 30.0},
        "versions": {"rollout_protocol": "0.4", "dataset_normalization": 1, "state_schema": 1},
    }
    inputs.update(changes)
    return inputs


RID = "6492c8f23b01490fb7b9079646eab07b"


def atif(rollout_id: str = RID, **extra: Any) -> dict[str, Any]:
    """A trajectory as the official SDK writes it (steps shortened)."""
    return {
        "schema_version": "ATIF-v1.7",
        "session_id": rollout_id,
        "trajectory_id": rollout_id,
        "agent": {"name": "osmosis-rollout-sdk", "version": "0.3.8"},
        "steps": [{"step_id": 1, "source": "user", "message": "say 13"}],
        "final_metrics": {"total_steps": 1},
        "extra": {"osmosis": {"rollout_id": rollout_id, "reward": 0.25}},
        **extra,
    }
