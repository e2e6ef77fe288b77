"""TOML source text for error messages: what `tomllib` does not tell.

`tomllib` reports no positions for the values it returns, and its syntax errors carry the
position inside their message. This module maps both back to lines of the text, and prints key
paths and values the way they are written in the file, so a problem found in a document can be
shown as `file:line: key: message`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from datetime import date, datetime, time
from typing import Any

from core.eval.errors import InputError, InputProblem
from core.eval.safe_text import quote_text
from core.eval.untrusted_json import TOO_DEEP

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML through the tomli backport
    import tomli as tomllib

KeyPath = tuple[str | int, ...]
"""A key path inside the document; ints index into arrays (`secrets.required[1]`)."""

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_BARE_VALUE = re.compile(r"[^,\]}#\n]*")  # numbers, booleans, dates: up to what ends them


# --------------------------------------------------------------------------------------------
# Parsing


_TOML_POSITION = re.compile(r"\s*\((?:at line (\d+), column (\d+)|at end of document)\)\s*$")


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """The document in `text`, read from `source`; a syntax error is an `InputError` at its line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError([_syntax_problem(str(exc), text, source)]) from None
    except RecursionError:
        # tomllib parses arrays and inline tables recursively; no position survives.
        raise InputError.single(source, f"invalid TOML: {TOO_DEEP}") from None
    except ValueError as exc:
        # Not a TOMLDecodeError, so no position: e.g. an integer too long for int().
        raise InputError.single(source, f"invalid TOML: {exc}") from None


def _syntax_problem(error: str, text: str, source: str) -> InputProblem:
    """Turn tomllib's "Invalid value (at line 3, column 9)" into file:line + message."""
    match = _TOML_POSITION.search(error)
    if match is None:
        return InputProblem(source, None, None, f"invalid TOML: {error}")
    reason = error[: match.start()]
    if match.group(1) is None:
        # "at end of document": the last line is where the reader gave up.
        last_line = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        return InputProblem(source, max(last_line, 1), None, f"invalid TOML: {reason}")
    line, column = int(match.group(1)), int(match.group(2))
    return InputProblem(source, line, None, f"invalid TOML at column {column}: {reason}")


# --------------------------------------------------------------------------------------------
# Locating keys


class TomlKeyLocator:
    """Maps a TOML key path to the 1-based line that defines it.

    Knows table headers (`[a.b]`, `[[a]]`), `key = value` lines, dotted and quoted keys, keys
    inside inline tables, and skips over multi-line strings and arrays so their contents are
    never mistaken for keys. Only meant for text that `tomllib` has already accepted; on
    anything it does not understand it moves on to the next line instead of failing.
    """

    def __init__(self, text: str) -> None:
        self._lines: dict[tuple[str, ...], int] = {}
        _KeyScanner(text, self._lines).run()

    def __contains__(self, path: object) -> bool:
        """Whether `path` (a tuple of keys) is defined itself, not just through an ancestor."""
        return path in self._lines

    def line_of(self, path: Sequence[str | int]) -> int | None:
        """The line of `path`, else of its nearest defined ancestor (its table), else None.

        Array indices in `path` are ignored: an array element is located at its array's key.
        """
        keys: list[str] = []
        for part in path:
            if isinstance(part, int):
                break
            keys.append(part)
        for end in range(len(keys), 0, -1):
            line = self._lines.get(tuple(keys[:end]))
            if line is not None:
                return line
        return None


_ESCAPES = {
    "b": "\b",
    "t": "\t",
    "n": "\n",
    "f": "\f",
    "r": "\r",
    '"': '"',
    "\\": "\\",
    "e": "\x1b",
}
_HEX_ESCAPE_LENGTHS = {"x": 2, "u": 4, "U": 8}


class _KeyScanner:
    """A forgiving single-pass scanner behind `TomlKeyLocator`."""

    def __init__(self, text: str, found: dict[tuple[str, ...], int]) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.found = found

    def run(self) -> None:
        table: tuple[str, ...] = ()
        while True:
            self._skip_space(newlines=True)
            if self.pos >= len(self.text):
                return
            start_line = self.line
            if self._peek() == "[":
                header = self._header()
                if header is not None:
                    table = header
                    self._record(header, start_line)
            else:
                key = self._key()
                if key is not None and self._take("="):
                    self._record(table + key, start_line)
                    self._skip_value(table + key)
            self._skip_rest_of_line()

    # -- movement

    def _peek(self) -> str:
        return self._char_at(self.pos)

    def _char_at(self, index: int) -> str:
        return self.text[index] if index < len(self.text) else ""

    def _move_to(self, new_pos: int) -> None:
        new_pos = min(new_pos, len(self.text))
        self.line += self.text.count("\n", self.pos, new_pos)
        self.pos = new_pos

    def _take(self, token: str) -> bool:
        self._skip_space(newlines=False)
        if self.text.startswith(token, self.pos):
            self._move_to(self.pos + len(token))
            return True
        return False

    def _skip_space(self, *, newlines: bool) -> None:
        """Skip blanks and comments (and, when `newlines`, line breaks too)."""
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in " \t" or (newlines and char in "\r\n"):
                self._move_to(self.pos + 1)
            elif char == "#":
                end = self.text.find("\n", self.pos)
                self._move_to(len(self.text) if end < 0 else end)
            else:
                return

    def _skip_rest_of_line(self) -> None:
        end = self.text.find("\n", self.pos)
        self._move_to(len(self.text) if end < 0 else end + 1)

    def _record(self, path: tuple[str, ...], line: int) -> None:
        # `[a.b]` and `a.b = 1` also define `a` when nothing did before.
        for end in range(1, len(path) + 1):
            self.found.setdefault(path[:end], line)

    # -- keys

    def _header(self) -> tuple[str, ...] | None:
        closing = "]]" if self.text.startswith("[[", self.pos) else "]"
        self._move_to(self.pos + len(closing))
        key = self._key()
        if key is None or not self._take(closing):
            return None
        return key

    def _key(self) -> tuple[str, ...] | None:
        parts: list[str] = []
        while True:
            self._skip_space(newlines=False)
            part = self._key_part()
            if part is None:
                return None
            parts.append(part)
            self._skip_space(newlines=False)
            if self._peek() != ".":
                return tuple(parts)
            self._move_to(self.pos + 1)

    def _key_part(self) -> str | None:
        char = self._peek()
        if char == '"':
            return self._basic_string()
        if char == "'":
            return self._literal_string()
        match = _BARE_KEY.match(self.text, self.pos)
        if match is None:
            return None
        self._move_to(match.end())
        return match.group()

    def _basic_string(self) -> str | None:
        """A one-line "..." string with its escapes decoded; None if unterminated."""
        chars: list[str] = []
        index = self.pos + 1
        while index < len(self.text) and self.text[index] != "\n":
            char = self.text[index]
            if char == '"':
                self._move_to(index + 1)
                return "".join(chars)
            if char == "\\":
                decoded, index = self._escape(index)
                chars.append(decoded)
                continue
            chars.append(char)
            index += 1
        self._move_to(index)
        return None

    def _escape(self, index: int) -> tuple[str, int]:
        """Decode the escape at `text[index]` (a backslash); return it and the next index."""
        kind = self.text[index + 1 : index + 2]
        if kind in _ESCAPES:
            return _ESCAPES[kind], index + 2
        length = _HEX_ESCAPE_LENGTHS.get(kind)
        if length is not None:
            digits = self.text[index + 2 : index + 2 + length]
            try:
                return chr(int(digits, 16)), index + 2 + length
            except ValueError:
                pass
        return self.text[index : index + 2], index + 2

    def _literal_string(self) -> str | None:
        end = self.text.find("'", self.pos + 1)
        newline = self.text.find("\n", self.pos + 1)
        if end < 0 or 0 <= newline < end:
            self._move_to(len(self.text) if newline < 0 else newline)
            return None
        value = self.text[self.pos + 1 : end]
        self._move_to(end + 1)
        return value

    # -- values

    def _skip_value(self, path: tuple[str, ...] | None) -> None:
        """Move past one value; record the keys of inline tables under `path`."""
        self._skip_space(newlines=False)
        if self.text.startswith('"""', self.pos):
            self._skip_multiline_string('"""', escapes=True)
        elif self.text.startswith("'''", self.pos):
            self._skip_multiline_string("'''", escapes=False)
        elif self._peek() == '"':
            self._basic_string()
        elif self._peek() == "'":
            self._literal_string()
        elif self._peek() == "[":
            self._skip_array()
        elif self._peek() == "{":
            self._skip_inline_table(path)
        else:
            match = _BARE_VALUE.match(self.text, self.pos)
            self._move_to(match.end() if match else self.pos)

    def _skip_multiline_string(self, delimiter: str, *, escapes: bool) -> None:
        index = self.pos + 3
        while index < len(self.text):
            if escapes and self.text[index] == "\\":
                index += 2
            elif self.text.startswith(delimiter, index):
                # Up to two quotes right before the delimiter belong to the content.
                run = 3
                while run < 5 and self._char_at(index + run) == delimiter[0]:
                    run += 1
                self._move_to(index + run)
                return
            else:
                index += 1
        self._move_to(len(self.text))

    def _skip_array(self) -> None:
        self._move_to(self.pos + 1)
        while self.pos < len(self.text):
            self._skip_space(newlines=True)
            char = self._peek()
            if char == "]":
                self._move_to(self.pos + 1)
                return
            if char in ",}":
                self._move_to(self.pos + 1)
                continue
            before = self.pos
            self._skip_value(None)  # array elements have no key path of their own
            if self.pos == before:
                self._move_to(self.pos + 1)

    def _skip_inline_table(self, path: tuple[str, ...] | None) -> None:
        self._move_to(self.pos + 1)
        while self.pos < len(self.text):
            self._skip_space(newlines=True)
            char = self._peek()
            if char == "}":
                self._move_to(self.pos + 1)
                return
            if char == ",":
                self._move_to(self.pos + 1)
                continue
            line = self.line
            key = self._key()
            if key is None or not self._take("="):
                self._move_to(self.pos + 1)
                continue
            inner = None if path is None else path + key
            if inner is not None:
                self._record(inner, line)
            self._skip_value(inner)


# --------------------------------------------------------------------------------------------
# Printing keys and values


def format_key_path(path: KeyPath) -> str:
    """`("evaluation", "limit")` → `evaluation.limit`; odd keys quoted, indices as `[i]`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        shown = part if _BARE_KEY.fullmatch(part) else quote_text(part)
        text = shown if not text else f"{text}.{shown}"
    return text


def describe_value(value: object) -> str:
    """A TOML value as the user would recognise it in an error message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return quote_text(value)
    if isinstance(value, int) and value.bit_length() > 64:
        # tomllib accepts integers of any size; repr() of a huge one can even raise.
        return "an integer outside the 64-bit range"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, (datetime, date, time)):
        return f"a date/time ({value.isoformat()})"
    return type(value).__name__  # pragma: no cover - tomllib returns nothing else
