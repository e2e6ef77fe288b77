"""The nesting limit of the user's input (core/eval/nesting.py): measured without recursion,
and a value at the limit still travels in a rollout request."""

from __future__ import annotations

import json

import pytest

from core.eval.nesting import MAX_NESTING, NestedTooDeep, load_json, too_deep
from core.types import RolloutInitRequest


def nested(levels: int, leaf: object = 1) -> object:
    """`leaf` inside `levels` objects and arrays, alternating (built without recursion)."""
    value = leaf
    for level in range(levels):
        value = {"k": value} if level % 2 else [value]
    return value


def test_depth_counts_containers_and_scalars_never_nest() -> None:
    assert too_deep("text", limit=0) is None
    assert too_deep({}, limit=1) is None
    assert too_deep({"a": [1]}, limit=2) is None
    assert too_deep({"a": [1]}, limit=1) == ("a",)
    assert too_deep({"wide": list(range(100_000)), "b": {"c": {}}}, limit=2) == ("b", "c")


def test_a_value_too_deep_for_recursion_is_measured() -> None:
    path = too_deep(nested(100_000))
    assert path is not None and len(path) == MAX_NESTING


def test_a_value_at_the_limit_is_sent_and_read_back_by_pydantic() -> None:
    # What the limit is for: metadata this deep survives the request's serialization and a
    # pydantic-based server's JSON parser; one level past their limits does not.
    metadata = {"k": nested(MAX_NESTING - 1)}
    assert too_deep(metadata) is None
    request = RolloutInitRequest(
        initial_messages=[],
        metadata=metadata,
        rollout_id="r",
        chat_completions_url="http://127.0.0.1:1/v1/rollouts/r",
    )
    body = request.model_dump_json()
    assert RolloutInitRequest.model_validate_json(body).metadata == metadata
    assert json.loads(body)["metadata"] == metadata


def test_text_too_deep_to_parse_is_invalid_json_not_a_recursion_error() -> None:
    with pytest.raises(NestedTooDeep, match="nested too deeply") as caught:
        load_json("[" * 100_000)
    assert isinstance(caught.value, ValueError)
    assert load_json(b'{"a": [1]}') == {"a": [1]}
