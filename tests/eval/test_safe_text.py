"""Untrusted text on a terminal: one rule for what may not reach it, two renderings of it."""

from __future__ import annotations

import pytest

from core.eval.safe_text import REPLACEMENT, quote_text, replace_unsafe, terminal_safe

UNSAFE = ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\u200e", "\u202e", "\u2066", "\u2028"]
UNSAFE += ["\u2029", "\ud800", "\ue000", "\U0010ffff"]


@pytest.mark.parametrize("char", UNSAFE, ids=[f"U+{ord(c):04X}" for c in UNSAFE])
def test_both_renderings_keep_the_same_characters_off_the_terminal(char: str) -> None:
    text = f"a{char}b"
    assert replace_unsafe(text) == f"a{REPLACEMENT}b"  # the width of a cell is kept
    escaped = terminal_safe(text)
    assert char not in escaped and escaped.startswith("a\\") and escaped.endswith("b")


@pytest.mark.parametrize("text", ["café", "6 × 7 = 42", "no\u00a0break", "日本語", "[bold]x[/]"])
def test_ordinary_text_passes_both_unchanged(text: str) -> None:
    assert replace_unsafe(text) == text
    assert terminal_safe(text) == text


def test_a_quoted_preview_is_short_and_escaped() -> None:
    assert quote_text('say "hi"\n') == '"say \\"hi\\"\\n"'
    assert quote_text("x" * 70, limit=5) == '"xxxxx"… (70 characters)'
