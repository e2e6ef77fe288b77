"""JSON that others wrote (core/eval/untrusted_json.py): the nesting limit, measured without
recursion (a value at the limit still travels in a rollout request), and the value checks."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import pytest

from core.eval.untrusted_json import (
    MAX_NESTING,
    NestedTooDeep,
    bool_of,
    float_of,
    int_of,
    is_finite,
    is_number,
    load_json,
    text_of,
    too_deep,
)
from core.iso_time import utc_moment
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


def test_the_value_checks_take_no_bool_and_no_infinite_number() -> None:
    assert [int_of(v) for v in (3, True, 3.0, "3", None)] == [3, None, None, None, None]
    assert [is_number(v) for v in (3, 2.5, math.inf, False, "1")] == [
        True,
        True,
        True,
        False,
        False,
    ]
    # An integer past float's range is no finite number (math.isfinite would overflow).
    assert [is_finite(v) for v in (3, 2.5, math.inf, math.nan, 10**400, True)] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    assert [float_of(v) for v in (3, 2.5, math.nan, 10**400, False)] == [3.0, 2.5, None, None, None]
    assert [text_of(v) for v in ("", "a", 1)] == ["", "a", None]
    assert [bool_of(v) for v in (True, 1, None)] == [True, None, None]


def test_a_moment_is_utc_unless_it_says_otherwise() -> None:
    utc = timezone.utc
    assert utc_moment("2026-12-03T21:28:07Z") == datetime(2026, 12, 3, 21, 28, 7, tzinfo=utc)
    assert utc_moment("2026-12-03T21:28:07") == datetime(2026, 12, 3, 21, 28, 7, tzinfo=utc)
    shifted = utc_moment("2026-12-03T22:28:07+01:00")
    assert shifted is not None and shifted.astimezone(utc).hour == 21
    assert [utc_moment(v) for v in ("yesterday", "", 1_700_000_000, None)] == [None] * 4
