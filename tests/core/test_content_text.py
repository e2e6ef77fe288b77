"""A message's content as text, in the shapes rollouts keep it: chat parts, OpenAI Agents SDK
output items, and either JSON-encoded into a string."""

from __future__ import annotations

import json

import pytest

from core.transcript import MAX_CONTENT_DEPTH, NESTED_TOO_DEEPLY, content_text
from tests.deep_content import INNERMOST, nested_items, nested_items_text

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


# -- nesting (issue 30) -----------------------------------------------------------------------
# Built inside each test, never as a parameter: pytest would print a parameter's value.


def test_items_nested_a_thousand_deep_are_read_to_the_bound() -> None:
    text = content_text(nested_items(1_000))
    assert text == NESTED_TOO_DEEPLY  # each level's text is its content's: only the mark is left


def test_a_string_of_items_nested_hundreds_deep_is_read_to_the_bound() -> None:
    # As in a dataset prompt: one string that parses into 350 levels (700 of arrays and
    # objects), three stack frames a level for the unbounded reader.
    text = content_text(nested_items_text(350))
    assert text == NESTED_TOO_DEEPLY


def test_a_string_too_deep_to_parse_is_shown_as_it_came() -> None:
    encoded = nested_items_text(1_000)
    assert content_text(encoded) == encoded


def test_content_at_the_bound_is_read_whole() -> None:
    assert content_text(nested_items(MAX_CONTENT_DEPTH)) == INNERMOST
    assert content_text(nested_items(MAX_CONTENT_DEPTH + 1)) == NESTED_TOO_DEEPLY
    assert content_text(nested_items_text(MAX_CONTENT_DEPTH)) == INNERMOST
    assert content_text(nested_items_text(MAX_CONTENT_DEPTH + 1)) == NESTED_TOO_DEEPLY
