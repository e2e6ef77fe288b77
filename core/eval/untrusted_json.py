"""JSON that others wrote (a dataset, a server's answer, a results folder, a viewer's frame),
read without trusting it: how deeply it may nest, a parser for text too deep to parse, and the
checks that take a value as the type a reader wants, or as nothing.

A dataset row's metadata travels inside the rollout request as JSON, and the config's
`[advanced]` table inside the run's manifest. Both pass through libraries with depth limits of
their own: pydantic refuses to serialize a request whose metadata nests 256 levels (probed:
255 is the last that works), its JSON parser, which a rollout server may use, refuses 200
levels, and Python's own parsers and printers recurse (about 1,000 levels). A value nested past
those limits used to be read and checked, and then failed every admission of its row.

`MAX_NESTING` is well inside all of them, so a value at the limit still fits when it is
wrapped in a request (or a manifest) and parsed again on the other side; no real dataset or
config comes near it. Depth counts containers: `{"a": 1}` nests 1 level, `{"a": [1]}` 2. The
check walks iteratively, so even a value that breaks recursion is measured.

Text nested too deeply for Python's JSON parser at all (a line of 100,000 `[`) makes it raise
`RecursionError`; `load_json` turns that into `NestedTooDeep`, a `ValueError` like any other
invalid JSON, so every reader of JSON that others wrote (a dataset, a trajectory, a results
file) reports it as the bad input it is instead of failing with a traceback.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeGuard

import orjson

from core.iso_time import utc_moment
from core.regular_file import read_document

MAX_NESTING = 128
TOO_DEEP = f"nested too deeply (more than {MAX_NESTING} levels of objects and arrays)"
"""The problem message for a value past `MAX_NESTING`, and for text too deep to parse."""

_CONTAINERS = (dict, list, tuple)


class NestedTooDeep(ValueError):
    """JSON text nested too deeply for Python's parser to read."""

    def __init__(self) -> None:
        super().__init__(TOO_DEEP)


def load_json(text: str | bytes) -> Any:
    """`json.loads(text)`; text nested too deeply to parse raises `NestedTooDeep`."""
    try:
        return json.loads(text)
    except RecursionError:
        raise NestedTooDeep from None


def load_record(line: bytes) -> Any:
    """One line osmosis-tui wrote (a journal record, a transition, a model call, a message of
    the attach protocol), parsed by orjson: five times `json.loads`'s speed, which a run of a
    million items reads millions of times over.

    Where orjson refuses text that `json.loads` takes (NaN, lone surrogates, a number past a
    double) `load_json` reads it. One reading differs: orjson reads an integer past 64 bits
    as a float. No writer of these files makes one, and a reader that checks its fields then
    finds no integer there; the journal, the one authority for resume, parses a record it
    would refuse again with `load_json` (`core.eval.results.events`), so that none of its
    records reads differently.
    """
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return load_json(line)


def load_json_file(path: Path) -> Any:
    """The JSON document in the file `path`, read as `core.regular_file.read_document` reads
    (a regular file, not through a symlink, at most `MAX_DOCUMENT_BYTES`): `OSError` when it
    cannot be read, `ValueError` when it is no UTF-8 JSON (`NestedTooDeep` included)."""
    return load_json(read_document(path).decode("utf-8"))


def too_deep(value: object, limit: int = MAX_NESTING) -> tuple[str | int, ...] | None:
    """The key path (inside `value`) of the first object or array nested past `limit`
    levels, or None when `value` nests `limit` levels or fewer."""
    stack: list[tuple[tuple[str | int, ...], object, int]] = [((), value, 1)]
    while stack:
        path, current, level = stack.pop()
        if not isinstance(current, _CONTAINERS):
            continue
        if level > limit:
            return path
        children = current.items() if isinstance(current, dict) else enumerate(current)
        stack.extend(
            ((*path, key), child, level + 1)
            for key, child in children
            if isinstance(child, _CONTAINERS)
        )
    return None


def is_int(value: object) -> TypeGuard[int]:
    """An integer; bool is an int subclass, and `true` is never a valid index or count."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """An integer or a float (infinite or NaN included: see `is_finite`), never a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite(value: object) -> TypeGuard[int | float]:
    """A number that converts to a finite float (an integer past float's range does not)."""
    if not is_number(value):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def int_of(value: object) -> int | None:
    return value if is_int(value) else None


def float_of(value: object) -> float | None:
    """A finite number as a float; None for anything else."""
    return float(value) if is_finite(value) else None


def text_of(value: object) -> str | None:
    return value if isinstance(value, str) else None


def bool_of(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def utc_time(value: object) -> datetime | None:
    """An ISO-8601 time (as `utc_moment` reads it) in UTC; None when it is none, or lies past
    the calendar's ends there (year 1 with an offset east of UTC, year 9999 with one west)."""
    moment = utc_moment(value)
    if moment is None:
        return None
    try:
        return moment.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        return None


def epoch_seconds(value: object) -> float | None:
    """An ISO-8601 time (as `utc_moment` reads it) as seconds since the epoch; None when it is
    none, or lies where a timestamp cannot (year 1 with an offset before UTC)."""
    moment = utc_moment(value)
    if moment is None:
        return None
    try:
        return moment.timestamp()
    except (OverflowError, ValueError):
        return None


__all__ = [
    "MAX_NESTING",
    "TOO_DEEP",
    "NestedTooDeep",
    "bool_of",
    "epoch_seconds",
    "float_of",
    "int_of",
    "is_finite",
    "is_int",
    "is_number",
    "load_json",
    "load_json_file",
    "text_of",
    "too_deep",
    "utc_time",
]
