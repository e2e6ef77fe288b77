"""`events.jsonl` (EVAL.md §6): the fsync'd journal, its repair, and SIGKILL at any moment."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.eval.results.events import (
    Journal,
    _scan_journal,
    _whole_records_size,
    journal_line,
)
from core.eval.results.records import ItemResult
from core.regular_file import read_lines
from tests.eval.results.helpers import file_mode, item_result

ROOT = Path(__file__).resolve().parents[3]


def test_append_then_load_last_record_wins(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with Journal.open(path) as journal:
        journal.append(item_result(0, 0, status="failed", reward=None, error_type="timeout"))
        journal.append(item_result(1, 0))
        journal.append(item_result(0, 0, rollout_id="retry"))
    assert file_mode(path) == 0o600
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert json.loads(lines[0])["error_type"] == "timeout"
    results = Journal.load(path)
    assert list(results) == [(1, 0), (0, 0)]
    assert results[(0, 0)].rollout_id == "retry"
    assert Journal.load(tmp_path / "missing.jsonl") == {}


def test_the_history_keeps_every_attempt_in_the_order_written(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with Journal.open(path) as journal:
        journal.append(item_result(0, 0, status="failed", reward=None, error_type="timeout"))
        journal.append(item_result(1, 0))
        journal.append(item_result(0, 0, rollout_id="retry"))
    with path.open("ab") as stream:
        stream.write(b"not json\n{}\n")
    warnings: list[str] = []
    history = Journal.history(path, on_warning=warnings.append)
    assert [(r.key, r.status) for r in history] == [
        ((0, 0), "failed"),
        ((1, 0), "success"),
        ((0, 0), "success"),
    ]
    assert history[2].rollout_id == "retry"
    assert len(warnings) == 2  # read as load reads it: the same lines skipped, said
    assert Journal.history(tmp_path / "missing.jsonl") == []


def test_every_append_is_fsynced_on_an_append_only_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    journal = Journal.open(tmp_path / "events.jsonl")
    fd = journal._fd
    assert fd is not None
    assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND
    synced.clear()
    for row in range(3):
        journal.append(item_result(row))
    assert synced == [fd, fd, fd]
    journal.close()
    with pytest.raises(ValueError):
        journal.append(item_result())


def test_an_existing_journal_is_narrowed_to_0600(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("")
    path.chmod(0o644)
    Journal.open(path).close()
    assert file_mode(path) == 0o600


def _line(result: ItemResult) -> str:
    """The line `Journal.append` writes for `result`."""
    return journal_line(result).decode()


# Records as official `osmosis eval run` 0.3.8 writes them (a run with a failure, a retry and
# a skip): canonical JSON, keys sorted, nulls left out, `duration_ms` a float.
OFFICIAL_LINES = [
    '{"duration_ms":183.19184800020594,"error_type":"agent_error",'
    '"rollout_id":"5c0dcdec093c4ece821ee76553352ffe","row_index":2,"run_index":0,'
    '"source_row_index":2,"status":"failed"}\n',
    '{"duration_ms":231.1877940001068,"reward":1.0,"rollout_id":"4e3ac15702a54898b4d412dec92738dc",'
    '"row_index":0,"run_index":0,"source_row_index":0,"status":"success","tokens":13}\n',
    '{"duration_ms":314.85496400000557,"rollout_id":"3308e033eb9e4c56a97b281c196bdabc",'
    '"row_index":1,"run_index":0,"source_row_index":1,"status":"skipped","tokens":13}\n',
]


def test_records_are_written_byte_for_byte_as_official_journals_hold_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(OFFICIAL_LINES))
    results = Journal.load(path)
    assert [r.status for r in results.values()] == ["failed", "success", "skipped"]
    assert results[(0, 0)].tokens == 13 and results[(0, 0)].reward == 1.0
    copy = tmp_path / "copy.jsonl"
    with Journal.open(copy) as journal:
        for result in results.values():
            journal.append(result)
    assert copy.read_text() == path.read_text()


def test_an_older_official_record_without_source_row_or_duration_still_reads(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"rollout_id":"ab12","row_index":0,"run_index":1,"status":"success"}\n')
    result = Journal.load(path)[(0, 1)]
    assert result.source_row_index is None
    assert result.duration_ms == 0.0


def test_records_that_the_fast_parser_refuses_or_reads_otherwise_read_as_before(
    tmp_path: Path,
) -> None:
    """orjson refuses NaN and reads an integer past 64 bits as a float; the standard parser
    reads both, and the journal's reading stays what it was."""
    path = tmp_path / "events.jsonl"

    def record(row: int, rest: str) -> str:
        return (
            f'{{"rollout_id":"r{row}","row_index":{row},"run_index":0,"status":"success",{rest}}}\n'
        )

    path.write_text(
        record(0, f'"tokens":{2**70}')
        + record(1, '"reward":NaN')
        + record(2, f'"reward":{10**400}')
        + record(3, '"reward":0.5,"duration_ms":12')
    )
    warnings: list[str] = []
    results = Journal.load(path, on_warning=warnings.append)
    assert results[(0, 0)].tokens == 2**70
    assert isinstance(results[(0, 0)].tokens, int)
    assert results[(3, 0)].duration_ms == 12.0
    assert list(results) == [(0, 0), (3, 0)]
    assert [warning.split(": ", 1)[1][:39] for warning in warnings] == [
        "skipped a record that is not a result (",
        "skipped a record that is not a result (",
    ]
    assert "reward must be a finite number, got nan" in warnings[0]
    assert "reward must be a number, got 1000" in warnings[1]


def test_a_torn_last_line_is_dropped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    whole = _line(item_result(0)) + _line(item_result(1))
    # Even a fragment that parses is dropped: its append never returned.
    for torn in ['{"row_index": 2, "run_in', json.dumps(item_result(2).to_json())]:
        path.write_text(whole + torn)
        warnings: list[str] = []
        results = Journal.load(path, on_warning=warnings.append)
        assert list(results) == [(0, 0), (1, 0)]
        assert len(warnings) == 1
        assert "torn last line" in warnings[0]
        assert path.read_text() == whole + torn  # load never writes


def test_an_invalid_line_in_the_middle_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(
        _line(item_result(0))
        + "garbage\n"
        + '{"kind": "other"}\n'
        + "\n"
        + "[" * 100_000  # too deep for the parser: a RecursionError before
        + "\n"
        + _line(item_result(1))
    )
    warnings: list[str] = []
    results = Journal.load(path, on_warning=warnings.append)
    assert list(results) == [(0, 0), (1, 0)]
    assert len(warnings) == 3
    assert ":2: skipped an invalid line" in warnings[0]
    assert ":3: skipped a record that is not a result" in warnings[1]
    assert ":5: skipped an invalid line (nested too deeply (more than 128 levels" in warnings[2]


def test_warnings_go_to_the_log_by_default(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(_line(item_result(0)) + "{")
    with caplog.at_level(logging.WARNING, logger="core.eval.results.events"):
        assert list(Journal.load(path)) == [(0, 0)]
    assert "torn last line" in caplog.text


@pytest.mark.parametrize("tail", ['{"row_index": 1, "ru', "not json\n", "\x00\x00\x00\x00"])
def test_open_repairs_a_torn_tail_before_appending(tmp_path: Path, tail: str) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(_line(item_result(0)) + tail)
    warnings: list[str] = []
    with Journal.open(path, on_warning=warnings.append) as journal:
        journal.append(item_result(1))
    assert path.read_text() == _line(item_result(0)) + _line(item_result(1))
    assert len(warnings) == 1
    assert "repaired" in warnings[0]
    repaired: list[str] = []
    assert list(Journal.load(path, on_warning=repaired.append)) == [(0, 0), (1, 0)]
    assert repaired == []


def test_a_well_formed_record_of_another_shape_is_never_cut(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    text = _line(item_result(0)) + '{"from": "a newer writer"}\n'
    path.write_text(text)
    Journal.open(path, on_warning=lambda _: None).close()
    assert path.read_text() == text


_CHILD = """
import os, sys, types
root, path, tag = sys.argv[1], sys.argv[2], sys.argv[3]
# Only the journal's own modules: importing the `core` package would load the client stack
# and make each of the many child processes slow to start.
for name, sub in (("core", "core"), ("core.eval", os.path.join("core", "eval"))):
    module = types.ModuleType(name)
    module.__path__ = [os.path.join(root, sub)]
    sys.modules[name] = module
from pathlib import Path
from core.eval.results.events import Journal
from core.eval.results.records import ItemResult
journal = Journal.open(Path(path), on_warning=lambda _: None)
sys.stdout.write("ready\\n")
sys.stdout.flush()
i = 0
while True:
    journal.append(ItemResult(
        row_index=i % 7, run_index=i % 3, rollout_id=f"{tag}-{i}", status="success",
        source_row_index=i % 7, reward=0.5, tokens=i, duration_ms=i,
        error_type="x" * (i % 40) or None,
    ))
    sys.stdout.write(f"{tag}-{i}\\n")  # acknowledged: append() has returned
    sys.stdout.flush()
    i += 1
"""


def test_journal_survives_sigkill_at_any_moment(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    rng = random.Random(20250101)
    acknowledged: set[str] = set()
    iterations = 0
    # Each round costs one interpreter start (~0.1 s), so the count is kept at the minimum
    # that still kills during startup, repair and appends a fair number of times each.
    while iterations < 20:
        if iterations % 3 == 1 and path.exists():
            # A crash mid-write, made certain: a fragment of a record, or bytes a power loss
            # could leave, with no newline. The next writer must cut it off first.
            fragment = _line(item_result(rng.randrange(7)))[: rng.randrange(1, 60)]
            path.open("ab").write(rng.choice([fragment.encode(), b"\x00" * rng.randrange(1, 99)]))
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(ROOT), str(path), f"k{iterations}"],
            stdout=subprocess.PIPE,
        )
        assert child.stdout is not None
        if rng.random() < 0.8:
            assert child.stdout.readline() == b"ready\n"
            time.sleep(rng.uniform(0, 0.03))
        else:
            time.sleep(rng.uniform(0, 0.1))  # maybe while it starts or repairs the tail
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        output = child.stdout.read().decode()
        child.stdout.close()
        acknowledged.update(line for line in output.split("\n")[:-1] if line != "ready")
        iterations += 1

        data = path.read_bytes() if path.exists() else b""
        *whole, _tail = data.split(b"\n")
        records = [ItemResult.from_json(json.loads(line)) for line in whole]  # every line whole
        written = {record.rollout_id for record in records}
        assert acknowledged <= written, "an acknowledged append was lost"
        warnings: list[str] = []
        loaded = Journal.load(path, on_warning=warnings.append) if path.exists() else {}
        assert all("torn last line" in warning for warning in warnings)
        last: dict[tuple[int, int], ItemResult] = {}
        for record in records:
            last[record.key] = record
        assert loaded == last

    assert iterations >= 20
    assert len(acknowledged) > 20


# Journal tails, each with whether a reader drops it (and `Journal.open` cuts it) when it
# is the last line, at a `max_line` of 40 bytes.
_PIECES = (
    (b'{"a": 1}\n', False),  # JSON of another shape: kept
    (b"garbage\n", True),  # no JSON
    (b"\n", False),
    (b"  \n", False),
    (b"[" * 30 + b"\n", True),  # JSON cut short
    (b'{"long": "' + b"x" * 60 + b'"}\n', True),  # longer than max_line
    (b"x" * 100 + b"\n", True),
)


@given(
    st.lists(st.sampled_from(_PIECES), max_size=6),
    st.binary(max_size=12).filter(lambda fragment: b"\n" not in fragment),
)
@settings(max_examples=300, deadline=None)
def test_the_repair_point_is_found_from_the_tail_as_the_readers_drop_it(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[tuple[bytes, bool]], fragment: bytes
) -> None:
    """`Journal.open` finds where to cut from the journal's end alone: a torn fragment, else
    a last line that is no JSON or too long, and nothing else; the readers, which read every
    line, drop the same line at the end."""
    path = tmp_path_factory.mktemp("journal") / "events.jsonl"
    first = _line(item_result(0)).encode()  # longer than 40 bytes: dropped when last
    last, dropped = pieces[-1] if pieces else (first, True)
    whole = first + b"".join(piece for piece, _ in pieces)
    path.write_bytes(whole + fragment)
    cut_last = dropped and not fragment  # a fragment is cut, and what precedes it kept
    expected = len(whole) - len(last) if cut_last else len(whole)
    assert _whole_records_size(path, max_line=40) == (expected, len(whole) + len(fragment))
    warnings: list[str] = []
    for _ in _scan_journal(path, read_lines(path, max_line=40), warnings):
        pass
    assert any("at the end" in warning for warning in warnings) == cut_last
    assert any("torn last line" in warning for warning in warnings) == bool(fragment)
