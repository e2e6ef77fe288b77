"""Reading a dataset file (EVAL.md §3) into raw records, the way `osmosis eval run` reads it.

Formats: JSONL (one object per non-blank line), CSV (header row) and Parquet (needs pyarrow).
A file that cannot be read at all is an `InputError`; a record that cannot be read is a
problem naming its file and line, collected with the others. Bytes that are not valid UTF-8
are a problem naming the line, not silently replaced: a replaced character would change the
prompt the model sees without anyone noticing, and the fix (re-save the file as UTF-8) is easy
once the line is known.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.eval.errors import InputError, InputProblem
from core.eval.safe_text import quote_text
from core.eval.untrusted_json import load_json

METADATA = "metadata"
LABEL_COLUMNS = ("ground_truth", "label")  # the first non-empty one is the label
COLUMNS = ("system_prompt", "user_prompt", *LABEL_COLUMNS, METADATA, "grade")
"""The columns a row is read from; any others are ignored."""
_FORMATS = {".jsonl": "jsonl", ".csv": "csv", ".parquet": "parquet"}
# Long prompts are normal; the csv module's default 128 KiB field limit is not (the official
# reader raises it to the same 16 MiB).
_CSV_FIELD_LIMIT = 16 * 1024 * 1024


def read_records(path: Path) -> tuple[bytes, RawRecords]:
    """The file's bytes and its records, or `InputError` when the file cannot be read at all."""
    source = str(path)
    kind = _FORMATS.get(path.suffix.lower())
    if kind is None:
        expected = ", ".join(_FORMATS)
        shown = quote_text(path.suffix) if path.suffix else "none"
        raise InputError.single(
            source, f"unsupported dataset format (extension {shown}); expected {expected}"
        )
    data = _read_bytes(path, source)
    if not data.strip():
        raise InputError.single(source, "the dataset file is empty")
    if kind == "parquet":
        return data, _parquet_records(path, source)
    text_lines = _decode_lines(data, source)
    if kind == "jsonl":
        return data, _jsonl_records(text_lines, source)
    return data, _csv_records(text_lines, source)


@dataclass(frozen=True)
class RawRecord:
    """A raw record before validation."""

    index: int
    line: int | None
    values: Mapping[str, object]


class RawRecords:
    """Records, or the problems that stopped them from being read."""

    def __init__(self) -> None:
        self.records: list[RawRecord] = []
        self.problems: list[InputProblem] = []


def _read_bytes(path: Path, source: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError.single(source, "dataset file not found") from None
    except IsADirectoryError:
        raise InputError.single(source, "is a directory, not a dataset file") from None
    except OSError as exc:
        raise InputError.single(source, f"cannot read the dataset: {exc.strerror}") from None


def _decode_lines(data: bytes, source: str) -> list[str]:
    """The file's lines (endings kept), or `InputError` naming every line that is not UTF-8.

    Decoding line by line loses nothing: a newline byte never occurs inside a UTF-8 sequence.
    """
    data = data.removeprefix(b"\xef\xbb\xbf")  # the byte order mark spreadsheet exports add
    lines: list[str] = []
    problems: list[InputProblem] = []
    for number, raw in enumerate(data.splitlines(keepends=True), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            message = (
                f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the "
                "line); save the file as UTF-8"
            )
            problems.append(InputProblem(source, number, None, message))
    if problems:
        raise InputError(problems)
    return lines


def _jsonl_records(lines: list[str], source: str) -> RawRecords:
    collected = RawRecords()
    index = 0  # counts bad records too, so a record's index never depends on other records
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        # Without its line break, so an error's column counts within this line.
        value, problem = parse_json(text.rstrip("\r\n"))
        if isinstance(value, dict):
            collected.records.append(RawRecord(index, number, value))
        else:
            message = problem or f"expected a JSON object, got {json_kind(value)}"
            collected.problems.append(InputProblem(source, number, None, message))
        index += 1
    return collected


def parse_json(text: str) -> tuple[object, str | None]:
    try:
        return load_json(text), None
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON at column {exc.colno}: {exc.msg}"
    except ValueError as exc:  # nested too deeply, an integer too long for int()
        return None, f"invalid JSON: {exc}"


def json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "a number"


def _csv_records(lines: list[str], source: str) -> RawRecords:
    collected = RawRecords()
    previous_limit = csv.field_size_limit(_CSV_FIELD_LIMIT)
    try:
        _read_csv(io.StringIO("".join(lines), newline=""), source, collected)
    finally:
        csv.field_size_limit(previous_limit)
    return collected


def _read_csv(stream: io.StringIO, source: str, collected: RawRecords) -> None:
    # strict: an unclosed quote is an error instead of silently swallowing every later row.
    reader = csv.reader(stream, strict=True)
    header: list[str] | None = None
    end_of_previous = 0
    while True:
        start = end_of_previous + 1
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            hint = "; is a quote left open?" if "end of data" in str(exc) else ""
            message = f"malformed CSV record ({exc}{hint}); rows from here on were not read"
            collected.problems.append(InputProblem(source, start, None, message))
            return
        end_of_previous = reader.line_num
        if not cells:
            continue  # a blank line is not a record
        if header is None:
            header = [name.strip() for name in cells]
            header_problems = list(_header_problems(header, source, start))
            if header_problems:
                # Every row would repeat them; the header is the one thing to fix.
                collected.problems.extend(header_problems)
                return
            continue
        if len(cells) > len(header):
            message = (
                f"{len(cells)} fields but the header has {len(header)}; "
                "quote values that contain commas"
            )
            collected.problems.append(InputProblem(source, start, None, message))
        # A short record leaves its last columns absent (None), as csv.DictReader does.
        values = {
            name: cells[column] if column < len(cells) else None
            for column, name in enumerate(header)
            if name
        }
        collected.records.append(RawRecord(len(collected.records), start, values))
    if header is None:
        collected.problems.append(InputProblem(source, None, None, "no header row"))


def _header_problems(header: list[str], source: str, line: int) -> Iterator[InputProblem]:
    for name in COLUMNS:
        if header.count(name) > 1:
            yield InputProblem(source, line, name, "column appears more than once")
    if METADATA in header:
        return
    columns = ", ".join(quote_text(name, limit=30) for name in header[:20])
    if "user_prompt" not in header:
        yield InputProblem(
            source, line, None, f"no user_prompt (or metadata) column; the columns are {columns}"
        )
    if not any(name in header for name in LABEL_COLUMNS):
        yield InputProblem(
            source,
            line,
            None,
            f"no ground_truth or label (or metadata) column; the columns are {columns}",
        )


def _parquet_records(path: Path, source: str) -> RawRecords:
    try:
        # Imported by name so pyarrow stays optional for installs and type checking alike.
        parquet: Any = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise InputError.single(
            source,
            "reading Parquet datasets needs pyarrow: pip install 'osmosis-tui[parquet]'",
        ) from None
    try:
        table_rows: list[dict[str, Any]] = parquet.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow's errors have no common public base class
        raise InputError.single(source, f"cannot read the Parquet file: {exc}") from None
    collected = RawRecords()
    collected.records = [RawRecord(index, None, row) for index, row in enumerate(table_rows)]
    return collected
