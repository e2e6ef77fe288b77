"""Messages shown as their text: chat parts, OpenAI Agents SDK items, JSON-encoded parts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tui.widgets.message_text import message_shown, text_shown

PARTS = [{"type": "output_text", "text": "391", "annotations": []}]
ITEM = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed"}


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "content": "391"},
        {**ITEM, "content": PARTS},  # the SDK's own output item
        {"role": "assistant", "content": json.dumps(PARTS)},  # its parts, JSON-encoded
        {"role": "assistant", "content": json.dumps({**ITEM, "content": PARTS})},
        {"role": "assistant", "content": [{"type": "text", "text": "391"}]},  # chat parts
        {"type": "function_call_output", "output": "391"},
    ],
)
def test_a_reply_shows_its_text(message: dict[str, Any]) -> None:
    assert message_shown(message) == "391"


def test_tool_calls_show_their_names() -> None:
    assert (
        message_shown(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"function": {"name": "multiply"}}],
            }
        )
        == "tool calls: multiply"
    )
    call = {"type": "function_call", "name": "multiply", "arguments": '{"a": 17}'}
    assert message_shown(call) == 'multiply({"a": 17})'


@pytest.mark.parametrize("text", ['{"answer": 42}', "[1, 2]", '[{"text": "no type"}]', "[oops"])
def test_json_that_is_not_message_parts_is_shown_as_it_came(text: str) -> None:
    assert message_shown({"role": "assistant", "content": text}) == text
    assert text_shown(text) == text


def test_a_reply_text_of_encoded_parts_shows_their_text() -> None:
    assert text_shown(json.dumps(PARTS)) == "391"
    assert text_shown("391") == "391"
