"""Dataset rows for `osmosis-tui eval` (EVAL.md §3): checked rows, and the ones a run selects.

`core.eval.plan.dataset_files` reads the file's records; every bad row is reported here with its
file and line before any rollout is sent, and all problems are collected and raised together
as one `InputError`.

Nesting: a column's value may nest at most `core.eval.untrusted_json.MAX_NESTING` levels of objects
and arrays (a metadata object rides inside the rollout request, whose serializer has a depth
limit of its own); a deeper one is a problem of its row, found before anything is sent.

Hostile content: row text is kept exactly as written (markup such as `[bold]`, control
characters and huge values included) because it is what the model must see; renderers treat it
as plain text. Error messages only show values through `quote_text`, which shortens and escapes
them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.eval.errors import InputError, InputProblem
from core.eval.plan.dataset_files import (
    COLUMNS,
    LABEL_COLUMNS,
    METADATA,
    RawRecord,
    RawRecords,
    json_kind,
    parse_json,
    read_records,
)
from core.eval.safe_text import quote_text
from core.eval.untrusted_json import TOO_DEEP, too_deep
from core.types import unpaired_surrogate

_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})
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
    data, records = read_records(path)
    rows = _validate_records(records, str(path))
    return Dataset(path=path, sha256=hashlib.sha256(data).hexdigest(), rows=rows)


# --------------------------------------------------------------------------------------------
# Validating


def _validate_records(collected: RawRecords, source: str) -> list[DatasetRow]:
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

    def __init__(self, record: RawRecord, source: str) -> None:
        self.record = record
        self.source = source
        self.problems: list[InputProblem] = []

    def add(self, column: str | None, message: str) -> None:
        if self.record.line is None:  # Parquet: say which row instead of which line
            message = f"row {self.record.index}: {message}"
        self.problems.append(InputProblem(self.source, self.record.line, column, message))


def _validate_record(
    record: RawRecord, source: str
) -> tuple[DatasetRow | None, list[InputProblem]]:
    check = _RowCheck(record, source)
    values = _within_nesting(check, record.values)
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


def _within_nesting(check: _RowCheck, values: Mapping[str, object]) -> Mapping[str, object]:
    """`values`, with each column nested past the limit reported and left empty (so that
    its other checks are not run on it)."""
    deep = [column for column in COLUMNS if too_deep(values.get(column)) is not None]
    for column in deep:
        check.add(column, TOO_DEEP)
    return {**values, **dict.fromkeys(deep)} if deep else values


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
    surrogate = unpaired_surrogate(text)
    if surrogate is not None:
        check.add(column, f"contains an unpaired surrogate ({surrogate!a})")
        return None
    return text


def _metadata(check: _RowCheck, value: object) -> dict[str, Any] | None:
    """An object, or a string holding one; empty (null, "", {}) = absent."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        decoded, problem = parse_json(value)
        if problem is not None:
            check.add(METADATA, problem)
            return None
        if too_deep(decoded) is not None:
            check.add(METADATA, TOO_DEEP)
            return None
        value = decoded
    if not isinstance(value, dict):
        check.add(METADATA, f"expected a JSON object, got {json_kind(value)}")
        return None
    try:
        # It travels as JSON in the rollout request: find unsendable values now, not then.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
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
    shown = quote_text(value) if isinstance(value, str) else json_kind(value)
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
