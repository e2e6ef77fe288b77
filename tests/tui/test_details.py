"""What the details pane says of a rollout (prompts and replies as text to read), and that
refreshing it cannot fail as the app closes."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from core.board import RolloutBoard
from core.rollout_record import RequestOptions
from core.types import RolloutResultResponse, RolloutSample, RolloutStatus
from tests.tui.states import NOW, T0, StaticSource, build_app, running_board
from tui.widgets.details import DetailsPane, describe

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


async def test_the_refresh_of_an_open_pane_while_the_app_closes_raises_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The once-a-second refresh can come while the app tears its widgets down: here it comes
    as the pane itself is unmounted, its body already removed."""
    app = build_app(StaticSource(running_board(), total=40))
    refreshed: list[bool] = []

    def refresh_now(pane: DetailsPane) -> None:
        assert pane.has_class("-open") and not pane.children  # the body is gone
        app._tick()
        refreshed.append(True)

    monkeypatch.setattr(DetailsPane, "on_unmount", refresh_now, raising=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
        await pilot.pause()
        assert app.details.display
    assert refreshed == [True]
