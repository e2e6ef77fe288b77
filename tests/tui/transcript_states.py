"""Deterministic transcript states: preview.json documents for the rollouts of
`states.running_board()`, and the dashboard over them with a transcript open.

The previews are in the official server's shape (ATIF-v1.7: tool calls by `function_name`,
their answers folded into the step that called them), written by hand after its preview writer;
tests/core/test_transcript.py reads ours as produced by server_stub itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from textual.pilot import Pilot

from core.types import PREVIEW_FILE
from tests.tui.states import (
    SYSTEM_PROMPT,
    WALL_T0,
    StaticSource,
    build_app,
    prepare_view,
    rollout_id,
    running_board,
)
from tui.app import DashboardApp
from tui.screens.transcript import TranscriptScreen

#: The running rollout whose transcript the snapshots show ("What is 51 * 44?").
RUNNING_ROW = 17
#: The wall clock of the frozen app: 95 s after the board's start, as `states.NOW`.
WALL_NOW = WALL_T0 + 95.0


def _instant(seconds_after_start: float) -> str:
    return datetime.fromtimestamp(WALL_T0 + seconds_after_start, timezone.utc).isoformat()


def preview(
    steps: list[dict[str, Any]],
    *,
    version: int = 1,
    updated: float = 93.0,
    turn: int | None = None,
    truncated: bool = False,
    status: str = "running",
    rollout: int = RUNNING_ROW,
) -> dict[str, Any]:
    """A preview document of the official shape; `updated` is seconds after the board's start."""
    numbered = [
        {"step_id": index, **step, "extra": {"osmosis": {"original_step_id": None}}}
        for index, step in enumerate(steps, start=1)
    ]
    return {
        "schema_version": "ATIF-v1.7",
        "session_id": rollout_id(rollout),
        "trajectory_id": rollout_id(rollout),
        "agent": {"name": "calculator", "version": "1.0.0", "model_name": "gpt-5-mini"},
        "steps": numbered,
        "extra": {
            "osmosis": {
                "rollout_id": rollout_id(rollout),
                "preview": True,
                "turn": turn if turn is not None else sum(s["source"] == "agent" for s in steps),
                "truncated": truncated,
                "status": status,
                "preview_version": version,
                "updated_at": _instant(updated),
            }
        },
    }


def calculator_steps() -> list[dict[str, Any]]:
    """A calculator agent two turns in: it multiplied, and is checking before it answers."""
    return [
        {"source": "system", "message": SYSTEM_PROMPT},
        {"source": "user", "message": "What is 51 * 44?"},
        {
            "source": "agent",
            "message": "I'll use the calculator.",
            "tool_calls": [
                {
                    "tool_call_id": "call_1",
                    "function_name": "multiply",
                    "arguments": {"a": 51, "b": 44},
                }
            ],
            "observation": {"results": [{"source_call_id": "call_1", "content": "2244"}]},
        },
        {
            "source": "agent",
            "message": "",
            "reasoning_content": "Check the product by dividing before answering.",
            "tool_calls": [
                {
                    "tool_call_id": "call_2",
                    "function_name": "divide",
                    "arguments": {"a": 2244, "b": 44},
                }
            ],
        },
    ]


def write_preview(root: Path, document: dict[str, Any]) -> Path:
    """Replace the rollout's preview.json as the servers do: a new file renamed over it."""
    rollout = str(document["extra"]["osmosis"]["rollout_id"])
    path = root / rollout / PREVIEW_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(".preview.tmp")
    temporary.write_text(json.dumps(document))
    os.replace(temporary, path)
    return path


def transcript_app(preview_root: Path) -> DashboardApp:
    """The snapshot dashboard, reading previews from `preview_root`."""
    return build_app(StaticSource(running_board(), total=40, preview_root=preview_root))


def open_transcript(row: int = RUNNING_ROW) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """A `run_before` for `snap_compare`: the transcript of `row`'s rollout open, its age told
    by the frozen wall clock (the `t` key opens the same screen on the real one)."""
    ready = prepare_view(cursor_row=row)

    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        app = cast(DashboardApp, pilot.app)
        record = app.board.records[rollout_id(row)]
        await app.push_screen(TranscriptScreen(app.source, record, wall_clock=lambda: WALL_NOW))
        await pilot.pause()

    return run_before
