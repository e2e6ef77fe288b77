"""A message's content as text, in the shapes rollouts keep it: chat parts, OpenAI Agents SDK
output items, and either JSON-encoded into a string."""

from __future__ import annotations

import json

import pytest

from core.transcript import content_text

PARTS = [{"type": "output_text", "text": "391", "annotations": []}]
ITEM = {"id": "msg_1", "type": "message", "role": "assistant", "content": PARTS}


@pytest.mark.parametrize(
    "content",
    [
        "391",
        PARTS,  # the SDK's parts
        ITEM,  # a whole output item
        [ITEM],
        json.dumps(PARTS),  # its parts, JSON-encoded
        json.dumps(ITEM),
        [{"type": "text", "text": "391"}],  # chat parts
        [{"type": "refusal", "refusal": "391"}],
    ],
)
def test_content_shows_its_text(content: object) -> None:
    assert content_text(content) == "391"


@pytest.mark.parametrize("text", ['{"answer": 42}', "[1, 2]", '[{"text": "no type"}]', "[oops"])
def test_json_that_is_not_message_parts_is_shown_as_it_came(text: str) -> None:
    assert content_text(text) == text
