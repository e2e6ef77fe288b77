"""What the details pane says of a rollout: prompts and replies as text to read."""

from __future__ import annotations

import io
import json

from rich.console import Console

from core.board import RolloutBoard
from core.rollout_record import RequestOptions
from core.types import RolloutResultResponse, RolloutSample, RolloutStatus
from tests.tui.states import NOW, T0
from tui.widgets.details import describe

PROMPT = "Multiply these:\n17\n23"
AGENTS_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "391", "annotations": []}],
}


def test_prompts_keep_their_lines_and_agents_replies_show_their_text() -> None:
    board = RolloutBoard()
    board.started_at = T0
    rollout_id = "a" * 32
    result = RolloutResultResponse(
        rollout_id=rollout_id,
        status=RolloutStatus.SUCCESS,
        sample=RolloutSample(
            messages=[
                {"role": "user", "content": PROMPT},
                AGENTS_REPLY,
                {"role": "assistant", "content": json.dumps(AGENTS_REPLY["content"])},
            ],
            reward=1.0,
        ),
    )
    board.observe(rollout_id, RolloutStatus.QUEUED, T0, row_index=0, run_index=0)
    record = board.observe(rollout_id, RolloutStatus.SUCCESS, T0 + 1, result=result)
    record.options = RequestOptions(
        initial_messages=({"role": "user", "content": PROMPT},), chat_completions_url="stub"
    )
    console = Console(width=60, record=True, file=io.StringIO())
    console.print(describe(record, board, NOW))
    lines = [" ".join(line.split()) for line in console.export_text().splitlines()]
    assert not any("\ufffd" in line for line in lines)
    prompt = lines.index("prompt Multiply these:")
    assert lines[prompt + 1 : prompt + 3] == ["17", "23"]
    assert lines.count("assistant 391") == 2
    assert not any("output_text" in line for line in lines)
