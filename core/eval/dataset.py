"""Dataset rows for `osmosis-tui eval` (EVAL.md §3), read the way `osmosis eval run` reads them.

Formats: JSONL (one object per non-blank line), CSV (header row) and Parquet (needs pyarrow).
Every bad row is reported with its file and line before any rollout is sent; all problems are
collected and raised together as one `InputError`.

Hostile content: row text is kept exactly as written (markup such as `[bold]`, control
characters and huge values included) because it is what the model must see; renderers treat it
as plain text. Error messages only show values through `quote_text`, which shortens and escapes
them. Bytes that are not valid UTF-8 are a problem naming the line, not silently replaced: a
replaced character would change the prompt the model sees without anyone noticing, and the fix
(re-save the file as UTF-8) is easy once the line is known.
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import io
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.eval.errors import InputError, InputProblem, quote_text

METADATA = "metadata"
LABEL_COLUMNS = ("ground_truth", "label")  # the first non-empty one is the label
_FORMATS = {".jsonl": "jsonl", ".csv": "csv", ".parquet": "parquet"}
_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})
# Long prompts are normal; the csv module's default 128 KiB field limit is not (the official
# reader raises it to the same 16 MiB).
_CSV_FIELD_LIMIT = 16 * 1024 * 1024
# A `--rows` range larger than this is a typo, and expanding it would exhaust memory.
MAX_SELECTED_ROWS = 10_000_000


@dataclass(frozen=True, slots=True)
class DatasetRow:
    """One validated dataset row."""

    source_row_index: int
    """0-based record index in the file (blank lines and the CSV header not counted)."""
    line: int | None
    """1-based line where the record starts; None for Parquet, which has no lines."""
    system_prompt: str | None
    user_prompt: str | None
    label: str | None
    metadata: dict[str, Any] | None
    grade: bool = True

    def initial_messages(self) -> list[dict[str, str]]:
        """The rollout's `initial_messages`: the system prompt, then the user prompt."""
        messages: list[dict[str, str]] = []
        if self.system_prompt is not None:
            messages.append({"role": "system", "content": self.system_prompt})
        if self.user_prompt is not None:
            messages.append({"role": "user", "content": self.user_prompt})
        return messages


@dataclass(frozen=True)
class Dataset:
    path: Path
    sha256: str
    """Of the file's bytes: what a resumed run checks it still has (EVAL.md §6)."""
    rows: list[DatasetRow]


def load_dataset(path: Path) -> Dataset:
    """Read and validate every row of the dataset at `path`; `InputError` lists all problems."""
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
        records = _parquet_records(path, source)
    else:
        text_lines = _decode_lines(data, source)
        records = (
            _jsonl_records(text_lines, source)
            if kind == "jsonl"
            else _csv_records(text_lines, source)
        )
    rows = _validate_records(records, source)
    return Dataset(path=path, sha256=hashlib.sha256(data).hexdigest(), rows=rows)


# --------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True)
class _Record:
    """A raw record before validation."""

    index: int
    line: int | None
    values: Mapping[str, object]


class _Collected:
    """Records, or the problems that stopped them from being read."""

    def __init__(self) -> None:
        self.records: list[_Record] = []
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


def _jsonl_records(lines: list[str], source: str) -> _Collected:
    collected = _Collected()
    index = 0  # counts bad records too, so a record's index never depends on other records
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        # Without its line break, so an error's column counts within this line.
        value, problem = _parse_json(text.rstrip("\r\n"))
        if isinstance(value, dict):
            collected.records.append(_Record(index, number, value))
        else:
            message = problem or f"expected a JSON object, got {_json_kind(value)}"
            collected.problems.append(InputProblem(source, number, None, message))
        index += 1
    return collected


def _parse_json(text: str) -> tuple[object, str | None]:
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON at column {exc.colno}: {exc.msg}"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    except ValueError as exc:  # e.g. an integer too long for int()
        return None, f"invalid JSON: {exc}"


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "a number"


def _csv_records(lines: list[str], source: str) -> _Collected:
    collected = _Collected()
    previous_limit = csv.field_size_limit(_CSV_FIELD_LIMIT)
    try:
        _read_csv(io.StringIO("".join(lines), newline=""), source, collected)
    finally:
        csv.field_size_limit(previous_limit)
    return collected


def _read_csv(stream: io.StringIO, source: str, collected: _Collected) -> None:
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
        collected.records.append(_Record(len(collected.records), start, values))
    if header is None:
        collected.problems.append(InputProblem(source, None, None, "no header row"))


def _header_problems(header: list[str], source: str, line: int) -> Iterator[InputProblem]:
    used = ("system_prompt", "user_prompt", *LABEL_COLUMNS, METADATA, "grade")
    for name in used:
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


def _parquet_records(path: Path, source: str) -> _Collected:
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
    collected = _Collected()
    collected.records = [_Record(index, None, row) for index, row in enumerate(table_rows)]
    return collected


# --------------------------------------------------------------------------------------------
# Validating


def _validate_records(collected: _Collected, source: str) -> list[DatasetRow]:
    problems = list(collected.problems)
    rows: list[DatasetRow] = []
    for record in collected.records:
        row, row_problems = _validate_record(record, source)
        problems.extend(row_problems)
        if row is not None:
            rows.append(row)
    if problems:
        raise InputError(problems)
    if not rows:
        raise InputError.single(source, "the dataset has no rows")
    return rows


class _RowCheck:
    """Problems found in one record, each located at the record."""

    def __init__(self, record: _Record, source: str) -> None:
        self.record = record
        self.source = source
        self.problems: list[InputProblem] = []

    def add(self, column: str | None, message: str) -> None:
        if self.record.line is None:  # Parquet: say which row instead of which line
            message = f"row {self.record.index}: {message}"
        self.problems.append(InputProblem(self.source, self.record.line, column, message))


def _validate_record(record: _Record, source: str) -> tuple[DatasetRow | None, list[InputProblem]]:
    check = _RowCheck(record, source)
    values = record.values
    system_prompt = _text(check, values, "system_prompt")
    user_prompt = _text(check, values, "user_prompt")
    label = _label(check, values)
    metadata = _metadata(check, values.get(METADATA))
    grade = _grade(check, values.get("grade"))
    if METADATA not in values:
        if user_prompt is None and "user_prompt" not in _reported(check):
            check.add("user_prompt", "missing; every row needs one when there is no metadata")
        if label is None and not (_reported(check) & set(LABEL_COLUMNS)):
            check.add(
                "ground_truth", "missing (or label); every row needs one when there is no metadata"
            )
    elif _has_no_input(check, system_prompt, user_prompt, metadata):
        # A metadata column waives the prompt, but a row with neither would send a rollout
        # with no input at all.
        check.add(None, "no user_prompt, system_prompt or metadata; the row has no input")
    if check.problems:
        return None, check.problems
    row = DatasetRow(
        source_row_index=record.index,
        line=record.line,
        system_prompt=system_prompt,
        user_prompt=user_prompt,
        label=label,
        metadata=metadata,
        grade=grade,
    )
    return row, []


def _has_no_input(
    check: _RowCheck, system_prompt: str | None, user_prompt: str | None, metadata: object
) -> bool:
    """No input at all, and no input column with a problem of its own that explains why."""
    if system_prompt is not None or user_prompt is not None or metadata is not None:
        return False
    return not _reported(check) & {"system_prompt", "user_prompt", METADATA}


def _reported(check: _RowCheck) -> set[str]:
    return {problem.key for problem in check.problems if problem.key is not None}


def _text(check: _RowCheck, values: Mapping[str, object], column: str) -> str | None:
    """A prompt: strings as they are, numbers and booleans stringified, empty = absent."""
    value = values.get(column)
    if value is None or value == "":
        return None
    if isinstance(value, (dict, list)):
        kind = "an object" if isinstance(value, dict) else "an array"
        check.add(column, f"expected text, got {kind}")
        return None
    return _encodable(check, column, value if isinstance(value, str) else str(value))


def _label(check: _RowCheck, values: Mapping[str, object]) -> str | None:
    for column in LABEL_COLUMNS:
        value = values.get(column)
        if value is None or value == "":
            continue
        # str() for every non-string, as the official reader does, so a grader sees the same
        # label here as under `osmosis eval run`.
        return _encodable(check, column, value if isinstance(value, str) else str(value))
    return None


def _encodable(check: _RowCheck, column: str, text: str) -> str | None:
    """`text`, unless it holds lone surrogates (JSON `"\\ud800"`) that cannot be sent."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        check.add(column, f"contains an unpaired surrogate ({text[exc.start]!a})")
        return None
    return text


def _metadata(check: _RowCheck, value: object) -> dict[str, Any] | None:
    """An object, or a string holding one; empty (null, "", {}) = absent."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        decoded, problem = _parse_json(value)
        if problem is not None:
            check.add(METADATA, problem)
            return None
        value = decoded
    if not isinstance(value, dict):
        check.add(METADATA, f"expected a JSON object, got {_json_kind(value)}")
        return None
    try:
        # It travels as JSON in the rollout request: find unsendable values now, not then.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as exc:
        check.add(METADATA, f"cannot be sent as JSON: {type(exc).__name__}")
        return None
    return value or None


def _grade(check: _RowCheck, value: object) -> bool:
    """The optional `grade` flag; absent or empty means true."""
    if value is None or isinstance(value, bool):
        return value is not False
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    if isinstance(value, str):
        word = value.strip().lower()
        if word == "" or word in _TRUE:
            return True
        if word in _FALSE:
            return False
    shown = quote_text(value) if isinstance(value, str) else _json_kind(value)
    check.add("grade", f"expected true or false, got {shown}")
    return True


# --------------------------------------------------------------------------------------------
# Selecting rows (--rows, --limit)


_ROWS_PART = re.compile(r"([0-9]+)(?:\s*-\s*([0-9]+))?")
_ROWS_EXAMPLE = 'e.g. "3,7,10-20"'


def parse_rows_spec(spec: str) -> list[int]:
    """Parse `--rows "3,7,10-20"` into 0-based positions: ranges inclusive, first order kept,
    duplicates dropped. Every bad part is reported at once."""
    if not spec.strip():
        raise InputError.single(
            "--rows", f"no rows given; expected positions and ranges, {_ROWS_EXAMPLE}"
        )
    positions: dict[int, None] = {}  # an ordered set
    problems: list[str] = []
    for part in (piece.strip() for piece in spec.split(",")):
        match = _ROWS_PART.fullmatch(part)
        if match is None:
            shown = quote_text(part) if part else "an empty entry"
            problems.append(f"{shown} is not a row position or range ({_ROWS_EXAMPLE})")
            continue
        first = int(match.group(1))
        last = first if match.group(2) is None else int(match.group(2))
        if last < first:
            problems.append(f'"{part}" runs backwards; write {last}-{first}')
        elif last - first + 1 + len(positions) > MAX_SELECTED_ROWS:
            problems.append(f'"{part}" selects more than {MAX_SELECTED_ROWS:,} rows')
        else:
            positions.update(dict.fromkeys(range(first, last + 1)))
    if problems:
        raise InputError(InputProblem("--rows", None, None, message) for message in problems)
    return list(positions)


def select_rows(
    dataset_rows: Sequence[DatasetRow],
    /,
    *,
    limit: int | None = None,
    rows: Sequence[int] | None = None,
) -> list[DatasetRow]:
    """The rows a run uses: those at the `--rows` positions (in file order), then the first
    `limit` of them."""
    selected = list(dataset_rows)
    if rows is not None:
        wanted = set(rows)
        outside = sorted(position for position in wanted if not 0 <= position < len(selected))
        if outside:
            raise InputError.single("--rows", _out_of_range(outside, len(selected)))
        selected = [row for position, row in enumerate(selected) if position in wanted]
    if limit is not None:
        if limit < 1:
            raise InputError.single("--limit", f"must be at least 1, got {limit}")
        selected = selected[:limit]
    if not selected:
        raise InputError.single("--rows", "selects no rows")
    return selected


def _out_of_range(positions: list[int], size: int) -> str:
    shown = ", ".join(str(position) for position in positions[:10])
    if len(positions) > 10:
        shown += f" and {len(positions) - 10} more"
    valid = f"0-{size - 1}" if size else "none"
    noun = "position" if len(positions) == 1 else "positions"
    return f"row {noun} {shown} out of range: the dataset has {size} rows (valid: {valid})"
