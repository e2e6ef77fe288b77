"""`Redactor`: a secret never survives in any form it reaches text in (EVAL.md §1, §6)."""

from __future__ import annotations

import json
from urllib.parse import quote, urlencode

import pytest

from core.eval.redact import MASK, Redactor

KEY = "k3y-Zq9w8e7r6t5y4u3i"
# Quotes, a backslash, non-ASCII and a space: characters that JSON, repr() and URL
# encoding all spell differently.
ODD_KEY = 'p"a\\ss wörd-1234'


def _forms(secret: str) -> list[str]:
    return [
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        quote(secret, safe=""),
    ]


@pytest.mark.parametrize("secret", [KEY, ODD_KEY])
@pytest.mark.parametrize(
    "render",
    [
        pytest.param(lambda s: f"calling with {s} now", id="plain"),
        pytest.param(lambda s: json.dumps({"llm_api_key": s, "x": 1}), id="json"),
        pytest.param(lambda s: json.dumps({"k": s}, ensure_ascii=False), id="json-unicode"),
        pytest.param(lambda s: json.dumps(json.dumps({"k": s})), id="json-in-json"),
        pytest.param(lambda s: f"Authorization: Bearer {s}\r\nHost: x", id="header"),
        pytest.param(lambda s: repr({"headers": {"Authorization": f"Bearer {s}"}}), id="repr"),
        pytest.param(lambda s: "GET /x?" + urlencode({"key": s}), id="query"),
        pytest.param(lambda s: f"error: {ValueError(s)!r}", id="exception-repr"),
        pytest.param(lambda s: f"{s}\n{s}{s}", id="repeated"),
    ],
)
def test_a_known_secret_never_survives(secret: str, render: object) -> None:
    assert callable(render)
    text = render(secret)
    out = Redactor([secret]).redact(text)
    for form in _forms(secret):
        assert form not in out, (form, out)
    assert MASK in out


def test_whitespace_around_a_secret_from_the_environment_is_ignored() -> None:
    out = Redactor([KEY + "\n"]).redact(f"key={KEY}.")
    assert KEY not in out


def test_short_and_empty_secrets_are_not_masked() -> None:
    redactor = Redactor(["", None, "abc", "  x "])
    text = "abc abcd x y"
    assert redactor.redact(text) == text


def test_four_characters_is_enough() -> None:
    assert Redactor(["wxyz"]).redact("a wxyz b") == f"a {MASK} b"


def test_a_secret_containing_another_is_masked_whole() -> None:
    out = Redactor(["abcd", "abcdefghij"]).redact("x abcdefghij y abcd z")
    assert out == f"x {MASK} y {MASK} z"


def test_with_secrets_adds_without_forgetting() -> None:
    first = Redactor(["first-secret"])
    both = first.with_secrets(["second-secret"])
    assert both.redact("first-secret second-secret") == f"{MASK} {MASK}"
    assert first.redact("second-secret") == "second-secret"


@pytest.mark.parametrize(
    ("text", "leaked"),
    [
        ("Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
        ("authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ('{"Authorization": "Bearer eyJhbGciOi.xyz"}', "eyJhbGciOi.xyz"),
        ("{'authorization': 'Bearer zzzzzzzzzz'}", "zzzzzzzzzz"),
        ("sent bearer 0123456789abcdef to the server", "0123456789abcdef"),
        ("OPENAI key sk-proj-AbCdEf0123456789xyz rejected", "AbCdEf0123456789xyz"),
        ("key=sk-ant-api03-ZZZZZZZZZZZZ", "ZZZZZZZZZZZZ"),
        ("ROLLOUT_LLM_API_KEY=hunter2hunter2", "hunter2hunter2"),
        ('{"api_key": "plainvalue123"}', "plainvalue123"),
        ("x-api-key: qwertyuiop", "qwertyuiop"),
        ("client_secret=s3cr3tvalue", "s3cr3tvalue"),
        ("password: letmein99", "letmein99"),
    ],
)
def test_generic_credentials_are_masked_without_being_known(text: str, leaked: str) -> None:
    out = Redactor().redact(text)
    assert leaked not in out
    assert MASK in out


def test_the_scheme_word_of_an_authorization_header_is_kept() -> None:
    assert Redactor().redact("Authorization: Bearer abcdefghijk") == f"Authorization: Bearer {MASK}"


@pytest.mark.parametrize(
    "text",
    [
        "the server bearer token is missing",
        "tokens: 1234, task-1234567890 finished",
        "disk-usage-monitor sk-short",
        "row 3 run 1: timeout -> 0123abcd",
        "[secrets] required = ['A']",
    ],
)
def test_ordinary_log_text_is_left_alone(text: str) -> None:
    assert Redactor(["unrelated-secret"]).redact(text) == text


def test_redaction_is_idempotent() -> None:
    redactor = Redactor([KEY])
    once = redactor.redact(f"Authorization: Bearer {KEY} api_key={KEY} sk-abcdefghijkl")
    assert redactor.redact(once) == once


def test_the_redactor_is_callable() -> None:
    assert Redactor([KEY])(KEY) == MASK
