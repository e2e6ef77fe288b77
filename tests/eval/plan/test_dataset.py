"""Dataset rows (EVAL.md §3): formats, column rules, problems with file and line, --rows."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from core.eval.errors import InputError
from core.eval.plan.dataset import (
    MAX_SELECTED_ROWS,
    DatasetRow,
    load_dataset,
    parse_rows_spec,
    select_rows,
)
from core.eval.untrusted_json import MAX_NESTING, TOO_DEEP


def write_jsonl(tmp_path: Path, rows: list[object], name: str = "data.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_text(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(InputError) as caught:
        load_dataset(path)
    return [str(problem) for problem in caught.value.problems]


def only_problem(path: Path) -> str:
    problems = problems_of(path)
    assert len(problems) == 1, problems
    return problems[0]


def row(index: int, **fields: Any) -> DatasetRow:
    blank = DatasetRow(
        source_row_index=index,
        line=index + 1,
        system_prompt=None,
        user_prompt=None,
        label=None,
        metadata=None,
        grade=True,
    )
    return dataclasses.replace(blank, **fields)


# --------------------------------------------------------------------------------------------
# JSONL


def test_jsonl_rows_lines_and_hash(tmp_path: Path) -> None:
    text = (
        '{"system_prompt": "Be terse.", "user_prompt": "2*3?", "ground_truth": "6"}\n'
        "\n"
        "   \n"
        '{"user_prompt": "4*5?", "label": 20, "extra": "ignored"}\n'
    )
    path = write_text(tmp_path, "d.jsonl", text)
    dataset = load_dataset(path)
    assert dataset.path == path
    assert dataset.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert dataset.rows == [
        row(0, line=1, system_prompt="Be terse.", user_prompt="2*3?", label="6"),
        row(1, line=4, user_prompt="4*5?", label="20"),
    ]


def test_initial_messages_are_system_then_user() -> None:
    assert row(0, system_prompt="S", user_prompt="U").initial_messages() == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
    ]
    assert row(0, user_prompt="U").initial_messages() == [{"role": "user", "content": "U"}]
    assert row(0, metadata={"k": 1}).initial_messages() == []


def test_dataset_row_is_frozen_with_slots() -> None:
    item = row(0, user_prompt="U", label="L")
    assert not hasattr(item, "__dict__")
    with pytest.raises(AttributeError):
        item.label = "other"  # type: ignore[misc]  # on purpose: a frozen field


def test_bad_json_and_non_objects_name_their_lines(tmp_path: Path) -> None:
    text = '{"user_prompt": "a", "label": "1"}\n{"user_prompt": \n[1, 2]\n"text"\nnull\n'
    path = write_text(tmp_path, "d.jsonl", text)
    assert problems_of(path) == [
        f"{path}:2: invalid JSON at column 17: Expecting value",
        f"{path}:3: expected a JSON object, got an array",
        f"{path}:4: expected a JSON object, got a string",
        f"{path}:5: expected a JSON object, got null",
    ]


def test_deeply_nested_json_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.jsonl", "[" * 200_000 + "\n")
    assert only_problem(path) == f"{path}:1: invalid JSON: {TOO_DEEP}"


def deep(levels: int) -> str:
    """JSON text of objects nested `levels` deep."""
    return '{"a": ' * levels + "1" + "}" * levels


def test_values_nested_past_the_limit_are_problems_at_their_line_and_column(
    tmp_path: Path,
) -> None:
    # Readable JSON, but a request holding it could not be sent: found now, not at admission.
    lines = [
        '{"user_prompt": "q", "label": "1", "metadata": ' + deep(MAX_NESTING) + "}",
        '{"user_prompt": "q", "label": "1", "metadata": ' + deep(MAX_NESTING + 1) + "}",
        '{"user_prompt": "q", "metadata": ' + deep(300) + "}",
        '{"user_prompt": "q", "ground_truth": ' + deep(300) + "}",
        '{"user_prompt": ' + deep(MAX_NESTING + 1) + ', "label": "1"}',
    ]
    path = write_text(tmp_path, "d.jsonl", "\n".join(lines) + "\n")
    assert problems_of(path) == [
        f"{path}:2: metadata: {TOO_DEEP}",
        f"{path}:3: metadata: {TOO_DEEP}",
        f"{path}:4: ground_truth: {TOO_DEEP}",
        f"{path}:5: user_prompt: {TOO_DEEP}",
    ]
    del lines[1:]
    path.write_text(lines[0] + "\n")
    assert load_dataset(path).rows[0].metadata == json.loads(deep(MAX_NESTING))


def test_csv_metadata_nested_past_the_limit_names_its_line(tmp_path: Path) -> None:
    cell = deep(MAX_NESTING + 1).replace('"', '""')
    path = write_text(tmp_path, "d.csv", f'user_prompt,label,metadata\nq,1,\nq,1,"{cell}"\n')
    assert only_problem(path) == f"{path}:3: metadata: {TOO_DEEP}"


def test_integer_too_long_to_convert_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.jsonl", '{"user_prompt": "q", "label": ' + "9" * 5000 + "}\n")
    assert only_problem(path).startswith(f"{path}:1: invalid JSON: Exceeds the limit (4300 digits)")


def test_crlf_line_endings(tmp_path: Path) -> None:
    text = '{"user_prompt": "a", "label": "1"}\r\n\r\n{"user_prompt": "b", "label": "2"}\r\n'
    rows = load_dataset(write_text(tmp_path, "d.jsonl", text)).rows
    assert [(r.line, r.user_prompt) for r in rows] == [(1, "a"), (3, "b")]


# --------------------------------------------------------------------------------------------
# Column rules


def test_ground_truth_wins_over_label_and_empty_means_absent(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path,
        [
            {"user_prompt": "a", "ground_truth": "gt", "label": "lb"},
            {"user_prompt": "b", "ground_truth": "", "label": "lb"},
            {"user_prompt": "c", "ground_truth": None, "label": "lb"},
        ],
    )
    assert [r.label for r in load_dataset(path).rows] == ["gt", "lb", "lb"]


@pytest.mark.parametrize(
    ("value", "label"),
    [(42, "42"), (1.5, "1.5"), (True, "True"), (0, "0"), ([1, 2], "[1, 2]")],
)
def test_non_string_labels_are_stringified(tmp_path: Path, value: object, label: str) -> None:
    path = write_jsonl(tmp_path, [{"user_prompt": "q", "label": value}])
    assert load_dataset(path).rows[0].label == label


def test_numeric_prompts_are_stringified_but_structures_are_not(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path,
        [
            {"user_prompt": 12, "system_prompt": "", "label": "x"},
            {"user_prompt": [{"role": "user"}], "label": "x"},
            {"user_prompt": "q", "system_prompt": {"a": 1}, "label": "x"},
        ],
    )
    assert problems_of(path) == [
        f"{path}:2: user_prompt: expected text, got an array",
        f"{path}:3: system_prompt: expected text, got an object",
    ]
    good = write_jsonl(
        tmp_path, [{"user_prompt": 12, "system_prompt": "", "label": "x"}], "g.jsonl"
    )
    assert load_dataset(good).rows[0] == row(0, user_prompt="12", label="x")


def test_every_row_needs_a_prompt_and_label_without_metadata(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path,
        [
            {"user_prompt": "ok", "label": "1"},
            {"label": "1"},
            {"user_prompt": "", "ground_truth": "1"},
            {"user_prompt": "no label"},
            {"system_prompt": "only system"},
        ],
    )
    missing_prompt = "user_prompt: missing; every row needs one when there is no metadata"
    missing_label = (
        "ground_truth: missing (or label); every row needs one when there is no metadata"
    )
    assert problems_of(path) == [
        f"{path}:2: {missing_prompt}",
        f"{path}:3: {missing_prompt}",
        f"{path}:4: {missing_label}",
        f"{path}:5: {missing_prompt}",
        f"{path}:5: {missing_label}",
    ]


def test_metadata_makes_prompt_and_label_optional(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path,
        [
            {"metadata": {"a": 1}},
            {"metadata": '{"b": [1, 2]}', "user_prompt": "q"},
            {"metadata": None, "user_prompt": "q"},
            {"metadata": "", "system_prompt": "s"},
            {"metadata": {}, "user_prompt": "q", "label": 5},
        ],
    )
    assert load_dataset(path).rows == [
        row(0, metadata={"a": 1}),
        row(1, metadata={"b": [1, 2]}, user_prompt="q"),
        row(2, user_prompt="q"),
        row(3, system_prompt="s"),
        row(4, user_prompt="q", label="5"),
    ]


def test_metadata_problems(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path,
        [
            {"metadata": '{"a": '},
            {"metadata": "[1, 2]"},
            {"metadata": 7},
            {"metadata": None},
            {"metadata": {}, "label": "x"},
        ],
    )
    no_input = "no user_prompt, system_prompt or metadata; the row has no input"
    assert problems_of(path) == [
        f"{path}:1: metadata: invalid JSON at column 7: Expecting value",
        f"{path}:2: metadata: expected a JSON object, got an array",
        f"{path}:3: metadata: expected a JSON object, got a number",
        f"{path}:4: {no_input}",
        f"{path}:5: {no_input}",
    ]


@pytest.mark.parametrize(
    ("value", "grade"),
    [(True, True), (False, False), (None, True), (1, True), (0, False), ("No", False)],
)
def test_grade_in_jsonl(tmp_path: Path, value: object, grade: bool) -> None:
    path = write_jsonl(tmp_path, [{"user_prompt": "q", "label": "l", "grade": value}])
    assert load_dataset(path).rows[0].grade is grade


def test_grade_defaults_to_true(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, [{"user_prompt": "q", "label": "l"}])
    assert load_dataset(path).rows[0].grade is True


@pytest.mark.parametrize(
    ("value", "shown"), [(2, "a number"), ("maybe", '"maybe"'), ([True], "an array")]
)
def test_bad_grade_values(tmp_path: Path, value: object, shown: str) -> None:
    path = write_jsonl(tmp_path, [{"user_prompt": "q", "label": "l", "grade": value}])
    assert only_problem(path) == f"{path}:1: grade: expected true or false, got {shown}"


# --------------------------------------------------------------------------------------------
# CSV


def test_csv_rows_with_quoted_newlines_keep_their_starting_line(tmp_path: Path) -> None:
    text = (
        "user_prompt,ground_truth,system_prompt,notes\n"
        '"line one\nline two",6,,x\n'
        "\n"
        'second,"7",Be terse,"multi\n\nline note"\n'
        "third,8,,\n"
    )
    dataset = load_dataset(write_text(tmp_path, "d.csv", text))
    assert dataset.rows == [
        row(0, line=2, user_prompt="line one\nline two", label="6"),
        row(1, line=5, user_prompt="second", label="7", system_prompt="Be terse"),
        row(2, line=8, user_prompt="third", label="8"),
    ]


def test_csv_written_by_the_csv_module_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["user_prompt", "label", "metadata"])
        writer.writerow(['say "hi", then\r\nstop', "x", json.dumps({"k": "v,w"})])
    rows = load_dataset(path).rows
    assert rows == [
        row(0, line=2, user_prompt='say "hi", then\r\nstop', label="x", metadata={"k": "v,w"})
    ]


@pytest.mark.parametrize(
    ("cell", "grade"),
    [
        ("true", True),
        ("FALSE", False),
        (" Yes ", True),
        ("no", False),
        ("1", True),
        ("0", False),
        ("", True),
    ],
)
def test_grade_in_csv(tmp_path: Path, cell: str, grade: bool) -> None:
    path = write_text(tmp_path, "d.csv", f"user_prompt,label,grade\nq,l,{cell}\n")
    assert load_dataset(path).rows[0].grade is grade


def test_bad_grade_in_csv(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.csv", "user_prompt,label,grade\nq,l,y\nq,l,no\nq,l,2\n")
    assert problems_of(path) == [
        f'{path}:2: grade: expected true or false, got "y"',
        f'{path}:4: grade: expected true or false, got "2"',
    ]


def test_csv_metadata_column_holds_json(tmp_path: Path) -> None:
    text = 'metadata,user_prompt\n"{""n"": 3}",\n,q\n"{bad",\n'
    path = write_text(tmp_path, "d.csv", text)
    assert only_problem(path) == (
        f"{path}:4: metadata: invalid JSON at column 2: "
        "Expecting property name enclosed in double quotes"
    )
    path.write_text('metadata,user_prompt\n"{""n"": 3}",\n,q\n')
    assert load_dataset(path).rows == [
        row(0, line=2, metadata={"n": 3}),
        row(1, line=3, user_prompt="q"),
    ]


def test_csv_without_needed_columns_says_so_once(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.csv", "prompt,answer\na,1\nb,2\nc,3\n")
    assert problems_of(path) == [
        f'{path}:1: no user_prompt (or metadata) column; the columns are "prompt", "answer"',
        f"{path}:1: no ground_truth or label (or metadata) column; the columns are "
        '"prompt", "answer"',
    ]


def test_csv_duplicate_used_column(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.csv", "user_prompt,label,label\nq,a,b\n")
    assert only_problem(path) == f"{path}:1: label: column appears more than once"


def test_csv_header_names_are_trimmed(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.csv", " user_prompt , label\nq,l\n")
    assert load_dataset(path).rows == [row(0, line=2, user_prompt="q", label="l")]


def test_csv_extra_fields_are_a_problem_short_rows_leave_columns_empty(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.csv", "user_prompt,label,system_prompt\nWhat is 2,3?,5,9\nq,l\n")
    assert only_problem(path) == (
        f"{path}:2: 4 fields but the header has 3; quote values that contain commas"
    )
    path.write_text("user_prompt,label,system_prompt\nq,l\n")
    assert load_dataset(path).rows == [row(0, line=2, user_prompt="q", label="l")]


def test_csv_unclosed_quote_is_reported_at_the_record_start(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.csv", 'user_prompt,label\nq,1\n"open,2\nr,3\ns,4\n')
    assert only_problem(path) == (
        f"{path}:3: malformed CSV record (unexpected end of data; is a quote left open?); "
        "rows from here on were not read"
    )


def test_csv_huge_field_is_read_and_field_limit_restored(tmp_path: Path) -> None:
    before = csv.field_size_limit()
    prompt = "x" * 1_000_000
    path = write_text(tmp_path, "d.csv", f"user_prompt,label\n{prompt},1\n")
    assert load_dataset(path).rows[0].user_prompt == prompt
    assert csv.field_size_limit() == before


def test_csv_with_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_bytes(b"\xef\xbb\xbfuser_prompt,label\r\nq,l\r\n")
    assert load_dataset(path).rows == [row(0, line=2, user_prompt="q", label="l")]


def test_csv_header_only_has_no_rows(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.csv", "user_prompt,label\n\n")
    assert only_problem(path) == f"{path}: the dataset has no rows"


# --------------------------------------------------------------------------------------------
# Files


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "none.jsonl"
    assert only_problem(path) == f"{path}: dataset file not found"


def test_directory(tmp_path: Path) -> None:
    path = tmp_path / "dir.jsonl"
    path.mkdir()
    assert only_problem(path) == f"{path}: is a directory, not a dataset file"


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
@pytest.mark.parametrize("name", ["d.jsonl", "d.csv"])
def test_empty_files(tmp_path: Path, content: str, name: str) -> None:
    path = write_text(tmp_path, name, content)
    assert only_problem(path) == f"{path}: the dataset file is empty"


def test_unsupported_extension(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.json", "[]")
    assert only_problem(path) == (
        f'{path}: unsupported dataset format (extension ".json"); expected .jsonl, .csv, .parquet'
    )


def test_invalid_utf8_names_every_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(
        b'{"user_prompt": "ok", "label": "1"}\n'
        b'{"user_prompt": "caf\xe9", "label": "1"}\n'
        b'{"user_prompt": "fine", "label": "1"}\n'
        b'{"user_prompt": "\xff\xfe", "label": "1"}\n'
    )
    assert problems_of(path) == [
        f"{path}:2: not valid UTF-8 (byte 0xe9 at byte 21 of the line); save the file as UTF-8",
        f"{path}:4: not valid UTF-8 (byte 0xff at byte 18 of the line); save the file as UTF-8",
    ]


def test_invalid_utf8_in_csv(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_bytes(b"user_prompt,label\nna\xefve,1\n")
    assert only_problem(path) == (
        f"{path}:2: not valid UTF-8 (byte 0xef at byte 3 of the line); save the file as UTF-8"
    )


def test_parquet_without_pyarrow_names_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry in sys.modules makes `import pyarrow` raise ImportError.
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1 not really parquet PAR1")
    assert only_problem(path) == (
        f"{path}: reading Parquet datasets needs pyarrow: pip install 'osmosis-tui[parquet]'"
    )


def test_parquet_rows_and_problems(tmp_path: Path) -> None:
    pyarrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    good = tmp_path / "good.parquet"
    parquet.write_table(
        pyarrow.table({"user_prompt": ["q0", "q1"], "label": [1, 2], "grade": [True, False]}),
        good,
    )
    assert load_dataset(good).rows == [
        row(0, line=None, user_prompt="q0", label="1"),
        row(1, line=None, user_prompt="q1", label="2", grade=False),
    ]
    bad = tmp_path / "bad.parquet"
    parquet.write_table(pyarrow.table({"user_prompt": ["q0", None], "label": [1, 2]}), bad)
    assert only_problem(bad) == (
        f"{bad}: user_prompt: row 1: missing; every row needs one when there is no metadata"
    )


def test_corrupt_parquet(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "d.parquet"
    path.write_bytes(b"not parquet at all")
    assert only_problem(path).startswith(f"{path}: cannot read the Parquet file: ")


# --------------------------------------------------------------------------------------------
# Hostile rows


def test_markup_and_control_characters_are_kept_verbatim(tmp_path: Path) -> None:
    prompt = "[bold red]boom[/] \x1b[2J\x07 \u202e tab\there"
    path = write_jsonl(tmp_path, [{"user_prompt": prompt, "label": "[link=x]y[/link]"}])
    only = load_dataset(path).rows[0]
    assert (only.user_prompt, only.label) == (prompt, "[link=x]y[/link]")


def test_huge_rows_are_read_whole(tmp_path: Path) -> None:
    prompt = "long " * 400_000
    path = write_jsonl(tmp_path, [{"user_prompt": prompt, "label": "1"}])
    assert load_dataset(path).rows[0].user_prompt == prompt


def test_hostile_values_are_escaped_and_shortened_in_messages(tmp_path: Path) -> None:
    grade = "\x1b[31m\u202e" + "y" * 500
    path = write_jsonl(tmp_path, [{"user_prompt": "q", "label": "l", "grade": grade}])
    problem = only_problem(path)
    assert "\x1b" not in problem
    assert "\u202e" not in problem
    assert problem == (
        f'{path}:1: grade: expected true or false, got "\\x1b[31m\\u202e'
        + "y" * 54
        + '"… (506 characters)'
    )


def test_lone_surrogates_cannot_be_sent(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.jsonl", '{"user_prompt": "a\\ud800b", "label": "1"}\n')
    assert (
        only_problem(path) == f"{path}:1: user_prompt: contains an unpaired surrogate ('\\ud800')"
    )
    path.write_text('{"metadata": {"k": "\\udfff"}}\n')
    assert only_problem(path) == f"{path}:1: metadata: cannot be sent as JSON: UnicodeEncodeError"


def test_many_bad_rows_are_all_kept_but_the_listing_is_capped(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, [{"label": str(i)} for i in range(45)])
    with pytest.raises(InputError) as caught:
        load_dataset(path)
    assert len(caught.value.problems) == 45
    assert [p.line for p in caught.value.problems] == list(range(1, 46))
    listing = str(caught.value).splitlines()
    assert len(listing) == 21
    assert listing[0].startswith(f"{path}:1: user_prompt: missing")
    assert listing[19].startswith(f"{path}:20: user_prompt: missing")
    assert listing[20] == "... and 25 more problems"


# --------------------------------------------------------------------------------------------
# --rows and --limit


@pytest.mark.parametrize(
    ("spec", "positions"),
    [
        ("3,7,10-12", [3, 7, 10, 11, 12]),
        (" 3 , 1 - 2 ", [3, 1, 2]),
        ("5,3,5,2-4", [5, 3, 2, 4]),
        ("0", [0]),
        ("4-4", [4]),
        ("007", [7]),
    ],
)
def test_parse_rows_spec(spec: str, positions: list[int]) -> None:
    assert parse_rows_spec(spec) == positions


@pytest.mark.parametrize(
    ("spec", "messages"),
    [
        ("10-5", ['--rows: "10-5" runs backwards; write 5-10']),
        ("x", ['--rows: "x" is not a row position or range (e.g. "3,7,10-20")']),
        ("", ['--rows: no rows given; expected positions and ranges, e.g. "3,7,10-20"']),
        ("  ", ['--rows: no rows given; expected positions and ranges, e.g. "3,7,10-20"']),
        ("3,,4", ['--rows: an empty entry is not a row position or range (e.g. "3,7,10-20")']),
        ("-1", ['--rows: "-1" is not a row position or range (e.g. "3,7,10-20")']),
        ("1-2-3", ['--rows: "1-2-3" is not a row position or range (e.g. "3,7,10-20")']),
        ("\u0663", ['--rows: "\u0663" is not a row position or range (e.g. "3,7,10-20")']),
        (
            "1,b,9-2,4",
            [
                '--rows: "b" is not a row position or range (e.g. "3,7,10-20")',
                '--rows: "9-2" runs backwards; write 2-9',
            ],
        ),
    ],
)
def test_bad_rows_specs(spec: str, messages: list[str]) -> None:
    with pytest.raises(InputError) as caught:
        parse_rows_spec(spec)
    assert [str(problem) for problem in caught.value.problems] == messages
    assert all(problem.source == "--rows" for problem in caught.value.problems)


def test_rows_spec_refuses_absurd_ranges() -> None:
    with pytest.raises(InputError) as caught:
        parse_rows_spec("0-99999999999")
    assert (
        str(caught.value) == f'--rows: "0-99999999999" selects more than {MAX_SELECTED_ROWS:,} rows'
    )


DATA = [row(i, user_prompt=f"q{i}", label=str(i)) for i in range(10)]


def test_select_rows_keeps_file_order_then_applies_limit() -> None:
    assert select_rows(DATA, limit=None, rows=None) == DATA
    assert select_rows(DATA, limit=3, rows=None) == DATA[:3]
    assert select_rows(DATA, limit=None, rows=[7, 2, 5]) == [DATA[2], DATA[5], DATA[7]]
    assert select_rows(DATA, limit=2, rows=[7, 2, 5]) == [DATA[2], DATA[5]]
    assert select_rows(DATA, limit=50, rows=None) == DATA


def test_select_rows_names_out_of_range_positions_and_the_size() -> None:
    with pytest.raises(InputError) as caught:
        select_rows(DATA, limit=None, rows=[3, 12, 10, 40])
    assert str(caught.value) == (
        "--rows: row positions 10, 12, 40 out of range: the dataset has 10 rows (valid: 0-9)"
    )


def test_select_rows_rejects_a_limit_below_one_and_empty_selections() -> None:
    with pytest.raises(InputError, match="--limit: must be at least 1, got 0"):
        select_rows(DATA, limit=0, rows=None)
    with pytest.raises(InputError, match="--rows: selects no rows"):
        select_rows(DATA, limit=None, rows=[])


def test_rows_spec_and_selection_together(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, [{"user_prompt": f"q{i}", "label": i} for i in range(30)])
    rows = select_rows(load_dataset(path).rows, limit=4, rows=parse_rows_spec("25-29,3,0-1"))
    assert [(r.source_row_index, r.line) for r in rows] == [(0, 1), (1, 2), (3, 4), (25, 26)]
