"""Bad-input reporting for `osmosis-tui eval` (EVAL.md §1: exit status 2).

Config, dataset and flag problems are collected rather than raised one at a time, so the user
sees everything wrong with their input in one go, each problem pointing at a file, a line and a
key. The CLI prints `str(InputError)` and exits 2.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

# Characters shown as-is in a quoted preview although their Unicode category is "C*": none.
# Everything in C* (controls, format characters such as bidi overrides, surrogates, private
# use, unassigned) and the line/paragraph separators is escaped, so a hostile value cannot
# move the cursor, recolour the terminal or reorder the rest of the message.
_ESCAPED_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
_SIMPLE_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(char: str) -> str:
    simple = _SIMPLE_ESCAPES.get(char)
    if simple is not None:
        return simple
    if unicodedata.category(char) not in _ESCAPED_CATEGORIES:
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


@dataclass(frozen=True)
class InputProblem:
    """One thing wrong with the user's input, and where it is."""

    source: str
    """The file path as the user gave it, or the flag at fault (`--rows`)."""
    line: int | None
    """1-based line in `source`, when known."""
    key: str | None
    """TOML key path (`evaluation.limit`), dataset column (`user_prompt`) or flag."""
    message: str

    def __str__(self) -> str:
        location = self.source if self.line is None else f"{self.source}:{self.line}"
        if self.key is None:
            return f"{location}: {self.message}"
        return f"{location}: {self.key}: {self.message}"


class InputError(Exception):
    """Bad input (config, dataset or flags); `problems` holds every problem found.

    `str()` lists the problems one per line; past `max_listed` it ends with a count of the
    rest, so a dataset with thousands of bad rows does not flood the terminal. `problems`
    always holds all of them.
    """

    max_listed: ClassVar[int] = 20

    def __init__(self, problems: Iterable[InputProblem]) -> None:
        self.problems: list[InputProblem] = list(problems)
        if not self.problems:
            raise ValueError("InputError needs at least one problem")
        # The problems themselves are the args, so the exception survives pickling intact.
        super().__init__(self.problems)

    @classmethod
    def single(
        cls, source: str, message: str, *, line: int | None = None, key: str | None = None
    ) -> InputError:
        return cls([InputProblem(source=source, line=line, key=key, message=message)])

    def __str__(self) -> str:
        lines = [str(problem) for problem in self.problems[: self.max_listed]]
        hidden = len(self.problems) - len(lines)
        if hidden > 0:
            lines.append(f"... and {hidden} more problem{'s' if hidden != 1 else ''}")
        return "\n".join(lines)
