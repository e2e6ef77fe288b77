"""Untrusted text (dataset values, server and model answers) made safe to show on a terminal.

One rule says which characters may not reach a terminal: everything in Unicode's "C*"
categories (controls, format characters such as bidi overrides, surrogates, private use,
unassigned) and the line and paragraph separators, so a hostile value cannot move the
cursor, recolour the terminal or reorder the rest of a line. Two renderings apply it:

- `terminal_safe` (and `quote_text`) escape them visibly (ESC as `\\x1b`) for the headless output
  and error messages, where the reader may want to know what the value held;
- `replace_unsafe` puts one U+FFFD in place of each, for the dashboard, where a cell must keep
  its width (it wraps the result in Rich `Text`, so `[` is never read as markup either);
  `multi_line` does the same a line at a time, for a block that keeps its line breaks (the
  dashboard's prompts and replies, the report's conversations).
"""

from __future__ import annotations

import unicodedata

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SIMPLE_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
REPLACEMENT = "\ufffd"


def _unsafe(char: str) -> bool:
    return unicodedata.category(char) in _UNSAFE_CATEGORIES


def _escape_char(char: str) -> str:
    simple = _SIMPLE_ESCAPES.get(char)
    if simple is not None:
        return simple
    if not _unsafe(char):
        return char
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def terminal_safe(text: str) -> str:
    """`text` with control and format characters escaped, so it cannot steer a terminal."""
    return "".join(_escape_char(char) for char in text)


def quote_text(text: str, limit: int = 60) -> str:
    """`text` as a short, double-quoted, terminal-safe preview for an error message.

    Values from the user's files may be huge or hostile; messages only ever show them through
    this function: at most `limit` characters, with control and format characters escaped.
    """
    shown = terminal_safe(text[:limit])
    if len(text) > limit:
        return f'"{shown}"… ({len(text)} characters)'
    return f'"{shown}"'


def replace_unsafe(text: str) -> str:
    """`text` with `REPLACEMENT` for each character that may not reach a terminal: the same
    length, so a table cell keeps its width."""
    if text.isprintable():  # the common case; isprintable() is stricter than the rule
        return text
    return "".join(REPLACEMENT if _unsafe(char) else char for char in text)


def multi_line(text: str) -> str:
    """Untrusted text for a block that wraps (a prompt, a reply): its own line breaks kept,
    tabs as spaces, any other character that may not reach a terminal as U+FFFD."""
    return "\n".join(replace_unsafe(line.expandtabs(4)) for line in text.splitlines())


def shown_value(value: object) -> str:
    """A value read from a server's or a model's JSON, as a short terminal-safe phrase for a
    message: numbers as Python writes them (`nan`, `inf`, `1e+30`), strings quoted."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    if isinstance(value, int) and value.bit_length() > 200:
        # str() of an integer past 4,300 digits raises; such a number is only its size here.
        return f"an integer of {value.bit_length()} bits"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return quote_text(value)
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "an array"
    return type(value).__name__
