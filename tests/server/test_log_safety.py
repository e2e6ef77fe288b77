"""server_stub's log filter: the keys it holds masked, control characters escaped."""

from __future__ import annotations

import logging

import pytest

from server_stub.log_safety import LogSafety, escape_controls

KEY = "key-" + "9a8b7c6d" * 3


def record(message: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord("server_stub.x", logging.WARNING, __file__, 1, message, args, exc_info)


def test_a_held_key_is_masked_in_message_and_traceback_until_its_last_holder_releases() -> None:
    safety = LogSafety()
    first, second = safety.hold(KEY), safety.hold(KEY)
    try:
        raise RuntimeError(f"refused {KEY!r}")
    except RuntimeError as exc:
        failed = record("workflow failed: %r (%s)", exc, KEY, exc=exc)
    assert safety.filter(failed)
    assert failed.getMessage() == """workflow failed: RuntimeError("refused '***'") (***)"""
    assert KEY not in (failed.exc_text or "") and "refused '***'" in (failed.exc_text or "")
    first()
    first()  # a second call releases nothing more
    masked = record("%s", KEY)
    safety.filter(masked)
    assert masked.getMessage() == "***"
    second()
    shown = record("%s", KEY)
    safety.filter(shown)
    assert shown.getMessage() == KEY


@pytest.mark.parametrize("short", [None, "", "abc"])
def test_short_keys_are_words_not_masked(short: str | None) -> None:
    safety = LogSafety()
    safety.hold(short)
    said = record("abc def")
    safety.filter(said)
    assert said.getMessage() == "abc def"


def test_control_characters_are_escaped_and_printable_text_kept() -> None:
    assert escape_controls("r1\r\nINFO:forged\x1b[31m\u202e é") == (
        "r1\\r\\nINFO:forged\\x1b[31m\\u202e é"
    )
    bad = record("rollout %s crashed", "a\nb")
    LogSafety().filter(bad)
    assert bad.getMessage() == "rollout a\\nb crashed"
    mismatched = record("%s %s", "only one")
    assert LogSafety().filter(mismatched)  # a record that does not format: the handler says so
