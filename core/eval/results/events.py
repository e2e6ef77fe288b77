"""`events.jsonl` of an eval run (EVAL.md §8): the journal of finished work items.

One `ItemResult.to_json()` object per line in the official form (canonical JSON: keys sorted,
no spaces, nulls left out, e.g. `{"duration_ms":231.18,"reward":1.0,"rollout_id":"4e3a…",
"row_index":0,"run_index":0,"source_row_index":0,"status":"success","tokens":13}`), written
with one `write()` on an `O_APPEND` descriptor and fsync'd before `Journal.append` returns.
It is the only authority for resume, ours and the official tool's alike; the last record of a
`(row_index, run_index)` wins, and there is no timestamp on purpose: append order decides.

Reading is more forgiving than the official reader, which stops on any bad committed line:
here a bad line is skipped with a warning (its item runs again), so one damaged record does
not hold every other result hostage. A record of an item the run's plan does not hold (a row
beyond the selection, a `run_index` of n or more: a journal edited by hand, or the plan
changed under it) is told apart by `Journal.load_for_plan`, with a warning naming its line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from core.eval.results.durable import (
    AppendFile,
    WarningSink,
    canonical_json,
    fsync_dir,
    open_append,
    write_all,
)
from core.eval.results.records import ItemKey, ItemResult
from core.eval.untrusted_json import load_json, load_record
from core.regular_file import MAX_LINE_BYTES, Line, open_regular, read_lines

logger = logging.getLogger(__name__)


def _log_warning(message: str) -> None:
    logger.warning("%s", message)


class _NotJson(ValueError):
    """A journal line that is no JSON at all (its parser's error is the cause)."""


def _result_of(data: bytes) -> ItemResult:
    """The result a journal line records; `_NotJson` when it is no JSON, `ValueError` or
    `TypeError` (from `ItemResult.from_json`) when it is JSON of another shape."""
    try:
        record = load_record(data)
    except ValueError as exc:
        raise _NotJson from exc
    try:
        return ItemResult.from_json(record)
    except (ValueError, TypeError):
        # orjson reads an integer past 64 bits as a float; the standard parser keeps it.
        return ItemResult.from_json(load_json(data))


def _scan_journal(
    path: Path, lines: Iterable[Line], warnings: list[str]
) -> Iterator[tuple[int, ItemResult]]:
    """Every record of the journal in file order (superseded ones too), with its line number;
    what was skipped or dropped goes to `warnings` as it reads.

    Each reader keeps what it needs of them (the final results, their lines, the whole
    history), so that a journal of a million records is never held twice. Where `Journal.open`
    cuts a torn tail is the same rule, read from the end (`_whole_records_size`).
    """
    # An unreadable line is dropped (and cut off before an append) when it is the last one,
    # and skipped when another follows it: known only once the next line comes. Held here as
    # the line and what it is ("an invalid line (…)").
    unreadable: tuple[Line, str, str] | None = None
    for line in lines:
        if unreadable is not None:
            skipped, what, why = unreadable
            warnings.append(f"{path}:{skipped.number}: skipped {what} ({why})")
            unreadable = None
        if not line.ended:
            # One write() per record ends with the newline, so an unterminated line is a
            # record that never finished (and whose append never returned): dropped even if
            # it parses.
            shown = (line.data or b"")[:60]
            warnings.append(
                f"{path}: dropped a torn last line ({line.length} bytes, no newline): {shown!r}"
            )
            break
        if line.data is None:
            unreadable = (line, "a line", f"longer than {MAX_LINE_BYTES:,} bytes: {line.length:,}")
            continue
        if not line.data.strip():
            continue
        try:
            result = _result_of(line.data)
        except _NotJson as exc:
            unreadable = (line, "an invalid line", str(exc.__cause__))
            continue
        except (ValueError, TypeError) as exc:
            # Valid JSON with a shape we do not know (e.g. a newer writer): reported and kept
            # in the file, never truncated away.
            warnings.append(f"{path}:{line.number}: skipped a record that is not a result ({exc})")
            continue
        yield line.number, result
    if unreadable is not None:
        last, what, why = unreadable
        warnings.append(f"{path}:{last.number}: dropped {what} at the end ({why})")


def _whole_records_size(path: Path, max_line: int = MAX_LINE_BYTES) -> tuple[int, int]:
    """Where the next record must start in the journal at `path`, and its size: the end of
    its last whole record, read from the file's tail alone.

    Only the end decides it: bytes after the last newline are a torn write (cut), else a last
    line that is no JSON or longer than `max_line` is cut (the lines `_scan_journal` reports
    as dropped), and nothing else is. A resume of a run of a million items reads its journal
    once (`load_for_plan`), not twice.
    """
    descriptor = open_regular(path)
    try:
        size = os.fstat(descriptor).st_size
        last = _newline_before(descriptor, size)
        if last < 0 or last < size - 1:
            return last + 1, size  # nothing whole, or a torn write after the last record
        start = _newline_before(descriptor, last) + 1
        if last - start > max_line:
            return start, size
        data = os.pread(descriptor, last - start, start)
        if data.strip():
            try:
                load_record(data)
            except ValueError:
                return start, size
        return size, size
    finally:
        os.close(descriptor)


def _newline_before(descriptor: int, end: int) -> int:
    """The offset of the last newline before `end` in the file, or -1."""
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        found = os.pread(descriptor, end - start, start).rfind(b"\n")
        if found >= 0:
            return start + found
        end = start
    return -1


_TAIL_CHUNK = 64 * 1024


def ends_with_whole_record(path: Path) -> bool:
    """Whether the journal at `path` ends with a whole record: nothing `Journal.open` would
    cut, nothing its readers would drop. False when it cannot be read (a FIFO, a symlink)."""
    try:
        good_size, size = _whole_records_size(path)
    except OSError:
        return False
    return good_size == size


@dataclass(frozen=True)
class PlannedResults:
    """The journal as a resume reads it: the results of the plan's work items, and those of
    items outside the plan (each reported once, at the line of its final record)."""

    planned: dict[ItemKey, ItemResult]
    outside: dict[ItemKey, ItemResult]


def _read(path: Path, on_warning: WarningSink | None) -> Iterator[tuple[int, ItemResult]]:
    """The journal at `path` scanned (as `_scan_journal`), its warnings reported once it is
    read to the end; nothing when there is none."""
    try:
        lines = read_lines(path)
    except FileNotFoundError:
        return
    warnings: list[str] = []
    yield from _scan_journal(path, lines, warnings)
    for warning in warnings:
        (on_warning or _log_warning)(warning)


def _keep_final(results: dict[ItemKey, ItemResult], key: ItemKey, result: ItemResult) -> None:
    # Re-inserting moves the key to the end: iteration order is the order of final records.
    results.pop(key, None)
    results[key] = result


def journal_line(result: ItemResult) -> bytes:
    """The line `Journal.append` writes for `result`, newline included."""
    return (canonical_json(result.to_json()) + "\n").encode("utf-8")


class Journal(AppendFile):
    """`events.jsonl`: the append-only, fsync'd record of finished work items.

    Safe under SIGKILL at any point: a record is one `write()` on an `O_APPEND` descriptor
    followed by `fsync`, so the file only ever ends with whole records or one unterminated
    fragment, and `open` cuts such a fragment off before the first append.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self._lock = threading.Lock()

    @staticmethod
    def load(path: Path, *, on_warning: WarningSink | None = None) -> dict[ItemKey, ItemResult]:
        """The final result of every journaled item; `{}` when the file does not exist.

        The last record for a key wins. A torn or invalid last line is dropped, an invalid
        line elsewhere is skipped; each is reported to `on_warning` (default: this module's
        logger). Reading never changes the file.
        """
        results: dict[ItemKey, ItemResult] = {}
        for _, result in _read(path, on_warning):
            _keep_final(results, result.key, result)
        return results

    @staticmethod
    def load_for_plan(
        path: Path,
        planned: Container[ItemKey],
        *,
        plan: str,
        on_warning: WarningSink | None = None,
    ) -> PlannedResults:
        """`load`, with the results of items outside `planned` set apart, each reported with
        its line; `plan` says what the plan holds ("3 rows × n = 1").

        Such a record is never run again and never counts as one of this run's items; the
        results files keep it (the official tool counts every journaled key there)."""
        inside: dict[ItemKey, ItemResult] = {}
        outside: dict[ItemKey, ItemResult] = {}
        line_of: dict[ItemKey, int] = {}
        for number, result in _read(path, on_warning):
            key = result.key
            if key in planned:
                _keep_final(inside, key, result)
            else:
                _keep_final(outside, key, result)
                line_of[key] = number
        for key in outside:
            (on_warning or _log_warning)(
                f"{path}:{line_of[key]}: a record of row_index {key[0]}, run_index "
                f"{key[1]}, which is no work item of this run ({plan}): not run, not counted "
                "in its progress; kept in index.jsonl and metrics.json, as the official tool "
                "keeps it"
            )
        return PlannedResults(inside, outside)

    @staticmethod
    def history(path: Path, *, on_warning: WarningSink | None = None) -> list[ItemResult]:
        """Every record of the journal in the order it was written, superseded attempts
        included (what a replay plays); `[]` when the file does not exist. Read as `load`
        reads it, with the same warnings."""
        return [result for _, result in _read(path, on_warning)]

    @classmethod
    def open(cls, path: Path, *, on_warning: WarningSink | None = None) -> Journal:
        """Open for appending (creating it 0600), first cutting off a torn tail."""
        created = not path.exists()
        fd = open_append(path)
        try:
            good_size, size = _whole_records_size(path)
            if good_size < size:
                os.ftruncate(fd, good_size)
                os.fsync(fd)
                (on_warning or _log_warning)(
                    f"{path}: repaired: cut {size - good_size} bytes of a torn last "
                    "line before appending"
                )
        except BaseException:
            os.close(fd)
            raise
        if created:
            fsync_dir(path.parent)
        return cls(path, fd)

    def append(self, result: ItemResult) -> None:
        """Write `result` as one line and fsync it; when this returns, it survives a crash."""
        line = journal_line(result)
        with self._lock:
            if self._fd is None:
                raise ValueError(f"{self.path} is closed")
            size = os.fstat(self._fd).st_size
            try:
                write_all(self._fd, line)
                os.fsync(self._fd)
            except OSError:
                # A full disk may take part of the line: cut it off again, so the file still
                # ends with a whole record (a resume would drop the fragment anyway).
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, size)
                raise


__all__ = ["Journal", "PlannedResults", "ends_with_whole_record", "journal_line"]
