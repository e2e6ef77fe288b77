"""Every text a rollout or a results folder gives the transcript, the details pane, the full view
and the table reaches the terminal through the one rule (`tui.widgets.format.plain`: Rich
`Text`, never markup, every character the terminal would act on replaced; issue 30, item 5).

Each field gets a hostile value of its own, tagged with the field's name: a window title (OSC 0),
a clipboard write (OSC 52), a screen clear, a bidi override and Rich markup. What is drawn must
show every tag as the literal markup it is, and hold no character that could steer a terminal.
"""

from __future__ import annotations

import io
import json
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console, RenderableType

from core.board import RolloutBoard
from core.eval.results.calls import ModelCall
from core.rollout_record import CancelRequest, RecordedRollout, RequestOptions, RolloutRecord
from core.transcript import read_preview, transcript_of_sample
from core.types import RolloutErrorCategory, RolloutResultResponse, RolloutSample, RolloutStatus
from tests.tui.states import NOW, T0
from tui.screens.rollout_view import result_json
from tui.widgets.details import describe
from tui.widgets.model_calls import model_call_list
from tui.widgets.table.columns import row_cells
from tui.widgets.transcript import Shown, header, steps

# The characters the terminal-safety rule keeps off the terminal (core/eval/safe_text.py); line
# breaks are the drawing's own.
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def hostile(field: str) -> str:
    return (
        f"\x1b]0;title {field}\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\u202e"
        f"[bold red]{field}[/bold red]\u202c"
    )


def shown(field: str) -> str:
    """How a hostile value's tag must read on the screen: markup as literal text."""
    return f"[bold red]{field}[/bold red]"


def drawn(*renderables: RenderableType) -> str:
    """What a terminal would be sent for `renderables` (wide, so no tag is cut)."""
    console = Console(width=400, file=io.StringIO(), color_system="truecolor")
    return "".join(
        segment.text for renderable in renderables for segment in console.render(renderable)
    )


def assert_safe(text: str, fields: Iterable[str]) -> None:
    steering = {
        f"U+{ord(char):04X}"
        for char in text
        if char != "\n" and unicodedata.category(char) in UNSAFE_CATEGORIES
    }
    assert not steering, f"characters that steer a terminal reach it: {sorted(steering)}"
    missing = [field for field in fields if shown(field) not in text]
    assert not missing, f"fields not shown as the literal text they are: {missing}"


# -- the transcript: a live preview's fields, a final sample's ----------------------------------

PREVIEW_FIELDS = (
    "source",
    "message",
    "reasoning_content",
    "function_name",
    "arguments",
    "tool_call_id",
    "observation",
    "status",
)


def test_every_field_of_a_preview_is_drawn_safely(tmp_path: Path) -> None:
    step = {
        "source": hostile("source"),
        "message": hostile("message"),
        "reasoning_content": hostile("reasoning_content"),
        "tool_calls": [
            {
                "tool_call_id": hostile("tool_call_id"),
                "function_name": hostile("function_name"),
                "arguments": hostile("arguments"),
            }
        ],
        "observation": {"results": [{"content": hostile("observation")}]},
    }
    document = {"steps": [step], "extra": {"osmosis": {"status": hostile("status")}}}
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(document))
    transcript = read_preview(path)
    assert transcript is not None
    view = Shown(hostile("rollout_id"), transcript, problem=hostile("problem"))
    assert_safe(
        drawn(header(view, NOW), steps(transcript, None)),
        (*PREVIEW_FIELDS, "rollout_id", "problem"),
    )


SAMPLE_FIELDS = ("role", "content", "reasoning", "name", "arguments", "id", "tool_call_id")


def test_every_field_of_a_final_samples_messages_is_drawn_safely() -> None:
    messages: list[dict[str, Any]] = [
        {
            "role": hostile("role"),
            "content": hostile("content"),
            "reasoning": hostile("reasoning"),
            "tool_calls": [
                {
                    "id": hostile("id"),
                    "function": {"name": hostile("name"), "arguments": hostile("arguments")},
                }
            ],
        },
        {"role": "tool", "tool_call_id": hostile("tool_call_id"), "content": "42"},
    ]
    transcript = transcript_of_sample(RolloutSample(messages=messages), status=hostile("status"))
    view = Shown("r-1", transcript)
    assert_safe(drawn(header(view, NOW), steps(transcript, None)), (*SAMPLE_FIELDS, "status"))


# -- the details pane, the full view, the table ------------------------------------------------


def hostile_record() -> RolloutRecord:
    """A finished rollout whose every text came from its server, its results folder or its
    model calls, each hostile."""
    board = RolloutBoard()
    board.started_at = T0
    rollout_id = hostile("rollout_id")
    sample = RolloutSample(
        messages=[
            {"role": hostile("role"), "content": hostile("content")},
            {"type": hostile("type"), "content": hostile("item")},  # an SDK item: no role
        ],
        metrics={hostile("metrics"): 1.0},
        reward=1.0,
    )
    result = RolloutResultResponse(
        rollout_id=rollout_id,
        status=RolloutStatus.FAILURE,
        sample=sample,
        err_category=RolloutErrorCategory.AGENT_ERROR,
        err_message=hostile("err_message"),
    )
    board.observe(rollout_id, RolloutStatus.QUEUED, T0, row_index=0, run_index=0)
    record = board.observe(rollout_id, RolloutStatus.FAILURE, T0 + 1, result=result)
    record.options = RequestOptions(
        initial_messages=({"role": "user", "content": hostile("prompt")},),
        chat_completions_url="stub",
        label=hostile("label"),
        metadata={hostile("metadata"): hostile("metadata_value")},
    )
    record.server = hostile("server")
    record.requeued_as = hostile("requeued_as")
    record.admission_error = hostile("admission_error")
    record.cancels += (CancelRequest(requested_at=T0 + 0.5, disposition=hostile("disposition")),)
    record.cancels += (CancelRequest(requested_at=T0 + 0.6, error=hostile("cancel_error")),)
    assert isinstance(record.observed, RecordedRollout)
    record.observed.last_poll_error = hostile("poll_error")
    call = ModelCall(
        call_id=1,
        rollout_id=rollout_id,
        streamed=False,
        requested_model=hostile("requested_model"),
        started_at=0.0,
        started_monotonic=T0 + 0.1,
        request_text=hostile("request_text"),
        ended_at=0.2,
        ended_monotonic=T0 + 0.2,
        status=500,
        error=hostile("call_error"),
    )
    board.call_started(call)
    board.call_ended(call)
    return record


DETAILS_FIELDS = (
    "rollout_id",
    "server",
    "requeued_as",
    "admission_error",
    "err_message",
    "role",
    "content",
    "type",
    "item",
    "prompt",
    "label",
    "cancel_error",
    "poll_error",
    "request_text",
    "call_error",
)


def test_every_field_of_the_details_pane_is_drawn_safely() -> None:
    record = hostile_record()
    board = RolloutBoard()
    board.started_at = T0
    # The metadata and metrics keys are drawn inside JSON (escaped there: `\u001b`); the last
    # cancel's disposition is a flag of the table's, the one before it a line of the history.
    assert_safe(drawn(describe(record, board, NOW)), DETAILS_FIELDS)


@pytest.mark.parametrize("redact", [None, str])
def test_the_full_views_model_calls_and_result_json_are_drawn_safely(redact: Any) -> None:
    record = hostile_record()
    assert_safe(
        drawn(model_call_list(record.model, T0, NOW), result_json(record.latest_result, redact)),
        ("request_text", "call_error"),
    )


def test_every_cell_of_the_table_is_safe() -> None:
    record = hostile_record()
    record.cancels += (CancelRequest(requested_at=T0 + 0.7, disposition=hostile("disposition")),)
    board = RolloutBoard()
    board.started_at = T0
    cells = row_cells(record, board, NOW, marked=False)
    assert_safe("".join(text for text, _style in cells.values()), ())
