"""The preview document on its own: trimming, bounds and redaction (PROTOCOL.md §8.2)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from core.types import MAX_PREVIEW_BYTES, MAX_PREVIEW_STEPS, RolloutSample
from server_stub.preview_document import encode, preview_document


def _sample(messages: list[dict[str, Any]], **extra: Any) -> RolloutSample:
    return RolloutSample(messages=messages, extra_fields=extra)


def _said(*texts: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text} for text in texts]


def _document(sample: RolloutSample, api_key: str | None = None) -> dict[str, Any]:
    document = preview_document(sample, "r-1", api_key)
    assert document is not None
    return document


def test_nothing_to_show_is_no_preview() -> None:
    assert preview_document(_sample([]), "r", None) is None
    unsaved = RolloutSample(messages=_said("a"), trajectory_messages=None)
    assert preview_document(unsaved, "r", None) is None


@pytest.mark.parametrize(
    ("turn", "shown"),
    [(3, 3), (-5, 0), (10**9, 1_000_000), (True, None), ("3", None), (None, None)],
)
def test_the_turn_is_a_bounded_count_or_nothing(turn: Any, shown: int | None) -> None:
    document = _document(_sample(_said("a"), _preview_turn=turn))
    assert document["extra"]["osmosis"]["turn"] == shown


def test_step_ids_of_the_rollout_are_kept_only_when_the_source_left_nothing_out() -> None:
    complete = _document(_sample(_said("a", "b"), _preview_truncated=False))
    assert [s["extra"]["osmosis"]["original_step_id"] for s in complete["steps"]] == [1, 2]
    assert complete["extra"]["osmosis"]["truncated"] is False
    unsaid = _document(_sample(_said("a", "b")))
    assert [s["extra"]["osmosis"]["original_step_id"] for s in unsaid["steps"]] == [None, None]
    assert unsaid["extra"]["osmosis"]["truncated"] is False
    windowed = _document(_sample(_said("a", "b"), _preview_truncated=True))
    assert windowed["extra"]["osmosis"]["truncated"] is True


def test_a_full_window_without_a_word_from_the_source_counts_as_truncated() -> None:
    document = _document(_sample(_said(*range(MAX_PREVIEW_STEPS))))
    assert document["extra"]["osmosis"]["truncated"] is True


def test_a_source_that_sends_too_much_is_cut_to_the_newest_steps() -> None:
    texts = [f"m{n}" for n in range(1, 251)]
    document = _document(_sample(_said(*texts), _preview_truncated=False))
    steps = document["steps"]
    assert len(steps) == MAX_PREVIEW_STEPS
    assert [s["message"] for s in steps] == texts[-MAX_PREVIEW_STEPS:]
    assert [s["step_id"] for s in steps] == list(range(1, MAX_PREVIEW_STEPS + 1))
    assert steps[0]["extra"]["osmosis"]["original_step_id"] == 151
    assert document["extra"]["osmosis"]["truncated"] is True


def test_bulky_and_deep_values_are_cut() -> None:
    deep: Any = "bottom"
    for _ in range(30):
        deep = [deep]
    content = [
        {"type": "text", "text": "kept", "logprobs": [0.1] * 10, "many": list(range(1500))},
        {"deep": deep},
    ]
    document = _document(_sample([{"role": "assistant", "content": content}]))
    shown = document["steps"][0]["message"]
    assert "logprobs" not in shown[0]
    assert len(shown[0]["many"]) == 1000
    assert "bottom" not in encode(document).decode()
    assert document["extra"]["osmosis"]["truncated"] is True


def test_the_document_always_fits_and_keeps_at_least_one_step() -> None:
    # Each message alone is under the per-string cap but they cannot all fit.
    wide = {"parts": ["y" * 16_000 for _ in range(100)]}
    document = _document(_sample([{"role": "user", "content": wide}]))
    assert len(encode(document)) <= MAX_PREVIEW_BYTES
    # The one step is too large on its own: a note stands in for it.
    assert [(s["step_id"], s["source"]) for s in document["steps"]] == [(1, "system")]
    assert "too large" in document["steps"][0]["message"]
    assert document["extra"]["osmosis"]["truncated"] is True


def test_credentials_are_masked_in_text_and_by_field_name() -> None:
    content = {
        "apiKey": "k1",
        "client-secret": "k2",
        "Authorization": "Bearer k3-token",
        "max_tokens": 100,
        "note": 'export OPENAI_API_KEY=sk-abcdefghijklmnop and {"password": "pw-1"}',
    }
    prose = "The bearer of bad news; a token of thanks; basic arithmetic."
    document = _document(_sample([{"role": "user", "content": content}, *_said(prose)]))
    shown = document["steps"][0]["message"]
    assert shown["apiKey"] == shown["client-secret"] == shown["Authorization"] == "[REDACTED]"
    assert shown["max_tokens"] == 100
    assert shown["note"] == 'export OPENAI_API_KEY=[REDACTED] and {"password": [REDACTED]}'
    assert document["steps"][1]["message"] == prose


def test_the_rollouts_own_key_is_masked_wherever_it_appears() -> None:
    key = "plain-key-without-a-pattern"
    messages = [*_said(f"the key is {key}"), {"role": "user", "content": {"field": key}}]
    document = _document(_sample(messages), api_key=key)
    assert key not in encode(document).decode()
    assert document["steps"][0]["message"] == "the key is [REDACTED]"
    assert document["steps"][1]["message"] == {"field": "[REDACTED]"}


def test_redaction_stays_fast_on_hostile_text() -> None:
    hostile = ("a-" * 8000) + ("secret" * 100) + ("http://a:" * 1000)
    started = time.monotonic()
    _document(_sample(_said(hostile)))
    assert time.monotonic() - started < 1.0
