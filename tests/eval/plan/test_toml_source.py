"""TOML source text: the key locator and how key paths print."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.eval.plan.toml_source import TomlKeyLocator, format_key_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML through the tomli backport
    import tomli as tomllib


def test_format_key_path_quotes_odd_keys() -> None:
    assert format_key_path(("evaluation", "limit")) == "evaluation.limit"
    assert format_key_path(("secrets", "required", 2)) == "secrets.required[2]"
    assert format_key_path(("a b", "c.d")) == '"a b"."c.d"'


# --------------------------------------------------------------------------------------------
# The key locator


LOCATOR_DOC = '''\
# comment = not a key
top = 1
dotted.inner.leaf = "v"

[table]
plain = 2
"quoted key" = 3
'literal.key' = 4
"esc\\u0041ped" = 5
  spaced . dotted = 6   # trailing comment
text = """
fake = 1
[fake_header]
still "" inside \\""" ""\"""
after_text = 7
literal = \'\'\'
[not.a.table]
\'\'\'
array = [
  1, # comment ]
  "]", \'[\',
  [2, 3],
  { in_array = 1 },
]
after_array = 8
inline = { a = 1, b = { c = "}" }, d = [1, 2] }

[[items]]
name = "first"

[[items]]
name = "second"

[deep.er.table]
key = 9
'''


@pytest.mark.parametrize(
    ("path", "line"),
    [
        (("top",), 2),
        (("dotted",), 3),
        (("dotted", "inner", "leaf"), 3),
        (("table",), 5),
        (("table", "plain"), 6),
        (("table", "quoted key"), 7),
        (("table", "literal.key"), 8),
        (("table", "escAped"), 9),
        (("table", "spaced", "dotted"), 10),
        (("table", "text"), 11),
        (("table", "after_text"), 15),
        (("table", "literal"), 16),
        (("table", "array"), 19),
        (("table", "after_array"), 25),
        (("table", "inline"), 26),
        (("table", "inline", "a"), 26),
        (("table", "inline", "b", "c"), 26),
        (("items",), 28),
        (("items", "name"), 29),
        (("deep",), 34),
        (("deep", "er", "table", "key"), 35),
    ],
)
def test_locator_finds_definitions(path: tuple[str, ...], line: int) -> None:
    assert TomlKeyLocator(LOCATOR_DOC).line_of(path) == line


def test_locator_never_mistakes_string_or_array_contents_for_keys() -> None:
    locator = TomlKeyLocator(LOCATOR_DOC)
    assert locator.line_of(("fake_header",)) is None
    assert locator.line_of(("not",)) is None
    assert locator.line_of(("table", "fake")) == 5  # falls back to [table], not line 12
    assert locator.line_of(("table", "in_array")) == 5


def test_locator_falls_back_to_the_nearest_ancestor_then_none() -> None:
    locator = TomlKeyLocator(LOCATOR_DOC)
    assert locator.line_of(("table", "missing", "deeper")) == 5
    assert locator.line_of(("table", "array", 3)) == 19
    assert locator.line_of(("nowhere",)) is None
    assert locator.line_of(()) is None


def test_locator_handles_crlf_and_garbage_without_failing() -> None:
    locator = TomlKeyLocator('a = 1\r\n\r\n[b]\r\nc = "x"\r\n')
    assert (locator.line_of(("a",)), locator.line_of(("b", "c"))) == (1, 4)
    broken = TomlKeyLocator('= oops\n[unclosed\n"open = 1\nd = """never closed\n')
    assert broken.line_of(("d",)) == 4


def test_locator_agrees_with_tomllib_on_every_key() -> None:
    """Every key tomllib returns from the sample document is located (none falls back)."""

    def walk(value: object, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        if not isinstance(value, dict):
            return []
        paths = []
        for key, inner in value.items():
            paths.append((*prefix, key))
            paths.extend(walk(inner, (*prefix, key)))
        return paths

    locator = TomlKeyLocator(LOCATOR_DOC)
    found = walk(tomllib.loads(LOCATOR_DOC), ())
    assert len(found) > 20
    assert all(locator.line_of(path) is not None for path in found)
    assert all(path in locator for path in found)  # exact matches, not ancestor fallbacks
    assert ("table", "fake") not in locator


@given(st.text(alphabet="[]{}\"'=.,#\n\r\t \\ab1u") | st.text())
def test_locator_never_fails_on_any_text(text: str) -> None:
    locator = TomlKeyLocator(text)
    line = locator.line_of(("a", "b"))
    assert line is None or 1 <= line <= text.count("\n") + 1
