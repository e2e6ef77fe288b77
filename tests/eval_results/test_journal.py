"""The results folder (EVAL.md §6): manifest and resume, events journal, transitions, index
and logs."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import random
import signal
import stat
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from core.eval.journal import (
    Journal,
    ResumeRefused,
    RunFolder,
    RunFolderError,
    RunLog,
    TransitionLog,
    default_run_name,
    index_rows,
    manifest_inputs,
    read_transitions,
    validate_run_name,
    write_index,
    write_json_atomic,
)
from core.eval.records import ItemResult, WorkItem
from core.eval.redact import Redactor

ROOT = Path(__file__).resolve().parents[2]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _inputs(**changes: Any) -> dict[str, Any]:
    inputs = manifest_inputs(
        model_path="openai/gpt-5-mini",
        dataset_sha256="ab" * 32,
        selected_source_rows=range(5),
        n=2,
        rollout="multiply",
        agent_timeout_s=450,
        grader_timeout_s=150,
    )
    inputs.update(changes)
    return inputs


def _result(row: int = 0, run: int = 0, **fields: Any) -> ItemResult:
    values: dict[str, Any] = {
        "row_index": row,
        "run_index": run,
        "rollout_id": f"id-{row}-{run}",
        "status": "success",
        "source_row_index": row + 10,
        "reward": 1.0,
        "tokens": 42,
        "duration_ms": 1234,
    }
    values.update(fields)
    return ItemResult(**values)


# -- records ----------------------------------------------------------------------------------


def test_item_result_json_omits_nulls_and_keeps_spec_order() -> None:
    failed = _result(status="failed", reward=None, tokens=None, error_type="timeout")
    assert list(failed.to_json().items()) == [
        ("row_index", 0),
        ("run_index", 0),
        ("rollout_id", "id-0-0"),
        ("status", "failed"),
        ("source_row_index", 10),
        ("duration_ms", 1234),
        ("error_type", "timeout"),
    ]
    assert ItemResult.from_json(failed.to_json()) == failed
    assert failed.key == (0, 0)


def test_item_result_from_json_normalises_numbers_and_ignores_unknown_keys() -> None:
    record = {**_result().to_json(), "reward": 1, "duration_ms": 12.6, "future": True}
    parsed = ItemResult.from_json(record)
    assert parsed.reward == 1.0
    assert isinstance(parsed.reward, float)
    assert parsed.duration_ms == 13


@pytest.mark.parametrize(
    "change",
    [
        {"status": "cancelled"},
        {"row_index": True},
        {"run_index": -1},
        {"rollout_id": ""},
        {"reward": "1"},
        {"tokens": 1.5},
        {"row_index": None},
    ],
)
def test_item_result_from_json_rejects_bad_records(change: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ItemResult.from_json({**_result().to_json(), **change})


def test_item_result_refuses_a_reward_json_cannot_hold() -> None:
    with pytest.raises(ValueError):
        _result(reward=float("nan"))


def test_work_item_is_a_frozen_slotted_key() -> None:
    item = WorkItem(row_index=3, run_index=1, source_row_index=7)
    assert item.key == (3, 1)
    assert not hasattr(item, "__dict__")
    with pytest.raises(AttributeError):
        item.row_index = 4  # type: ignore[misc]


# -- run folder -------------------------------------------------------------------------------


def test_a_new_run_folder_gets_a_private_folder_and_a_manifest(tmp_path: Path) -> None:
    output = tmp_path / ".osmosis" / "evals"
    run = RunFolder.open(output, "demo-1", _inputs(), fresh=False)
    assert run.path == output / "demo-1"
    assert not run.resumed
    assert _mode(run.path) == 0o700
    assert _mode(run.manifest_path) == 0o600
    manifest = json.loads(run.manifest_path.read_text())
    assert list(manifest) == ["schema_version", "run_name", "created_at", "inputs"]
    assert manifest["schema_version"] == 1
    assert manifest["run_name"] == "demo-1"
    assert manifest["created_at"].endswith("Z")
    created = datetime.fromisoformat(manifest["created_at"].replace("Z", "+00:00"))
    offset = created.utcoffset()
    assert offset is not None and offset.total_seconds() == 0
    assert manifest["inputs"] == {
        "model_path": "openai/gpt-5-mini",
        "dataset": {"sha256": "ab" * 32, "selected_source_rows": [0, 1, 2, 3, 4]},
        "n": 2,
        "rollout": "multiply",
        "timeouts": {"agent_s": 450, "grader_s": 150},
    }
    assert run.created_at == manifest["created_at"]
    assert [p.name for p in tmp_path.rglob(".*.tmp")] == []


def test_reopening_with_the_same_inputs_resumes(tmp_path: Path) -> None:
    first = RunFolder.open(tmp_path, "r", _inputs(), fresh=False)
    (first.events_path).write_text("")
    # 450.0 is the same timeout as 450.
    same = _inputs(timeouts={"agent_s": 450.0, "grader_s": 150})
    again = RunFolder.open(tmp_path, "r", same, fresh=False)
    assert again.resumed
    assert again.created_at == first.created_at
    assert again.events_path.exists()


def test_a_resume_with_changed_inputs_is_refused_by_key(tmp_path: Path) -> None:
    RunFolder.open(tmp_path, "r", _inputs(), fresh=False)
    changed = _inputs(
        dataset={"sha256": "cd" * 32, "selected_source_rows": [0, 1, 2, 3, 4]},
        n=4,
        timeouts={"agent_s": 450},
    )
    with pytest.raises(ResumeRefused) as caught:
        RunFolder.open(tmp_path, "r", changed, fresh=False)
    refused = caught.value
    assert refused.changed_keys == ["dataset.sha256", "n", "timeouts.grader_s"]
    message = str(refused)
    for key in refused.changed_keys:
        assert key in message
    assert "use --fresh to start over, or --name for a new run" in message
    assert isinstance(refused, RunFolderError)


def test_a_changed_row_selection_and_a_true_for_one_are_changes(tmp_path: Path) -> None:
    RunFolder.open(tmp_path, "r", _inputs(), fresh=False)
    changed = _inputs(dataset={"sha256": "ab" * 32, "selected_source_rows": [0, 1, 2]}, n=True)
    with pytest.raises(ResumeRefused) as caught:
        RunFolder.open(tmp_path, "r", {**changed, "extra": 1}, fresh=False)
    assert caught.value.changed_keys == ["dataset.selected_source_rows", "extra", "n"]


def test_fresh_moves_the_old_folder_aside_and_starts_clean(tmp_path: Path) -> None:
    old = RunFolder.open(tmp_path, "r", _inputs(), fresh=False)
    old.events_path.write_text("kept\n")
    first = RunFolder.open(tmp_path, "r", _inputs(n=8), fresh=True)
    assert not first.resumed
    assert first.moved_aside is not None
    assert first.moved_aside.name.startswith("r.old-")
    assert (first.moved_aside / "events.jsonl").read_text() == "kept\n"
    assert sorted(p.name for p in first.path.iterdir()) == ["manifest.json"]
    second = RunFolder.open(tmp_path, "r", _inputs(), fresh=True)
    assert second.moved_aside is not None
    assert second.moved_aside != first.moved_aside  # same second: a numbered name
    assert second.moved_aside.exists() and first.moved_aside.exists()


def test_fresh_without_an_existing_folder_just_creates_it(tmp_path: Path) -> None:
    run = RunFolder.open(tmp_path, "r", _inputs(), fresh=True)
    assert run.moved_aside is None
    assert run.manifest_path.exists()


def test_an_empty_folder_is_adopted_but_a_foreign_one_is_not(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert not RunFolder.open(tmp_path, "empty", _inputs(), fresh=False).resumed
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    with pytest.raises(RunFolderError, match="--fresh"):
        RunFolder.open(tmp_path, "foreign", _inputs(), fresh=False)
    (tmp_path / "afile").write_text("")
    with pytest.raises(RunFolderError):
        RunFolder.open(tmp_path, "afile", _inputs(), fresh=False)


@pytest.mark.parametrize(
    "manifest", ["{not json", "[]", '{"schema_version": 2, "inputs": {}}', '{"schema_version": 1}']
)
def test_an_unreadable_manifest_is_an_input_error(tmp_path: Path, manifest: str) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "manifest.json").write_text(manifest)
    with pytest.raises(RunFolderError):
        RunFolder.open(tmp_path, "r", _inputs(), fresh=False)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b", ".hidden", "-x", "a\nb", "x" * 200])
def test_unsafe_run_names_are_refused(name: str) -> None:
    with pytest.raises(RunFolderError):
        validate_run_name(name)


def test_default_run_names() -> None:
    now = datetime(2025, 3, 4, 5, 6, 7)
    assert default_run_name("multiply", now=now) == "multiply-20250304-050607"
    assert default_run_name("my eval/v2", now=now) == "my-eval-v2-20250304-050607"
    assert default_run_name("..", now=now) == "eval-20250304-050607"
    validate_run_name(default_run_name("x" * 300))


# -- events.jsonl -----------------------------------------------------------------------------


def test_append_then_load_last_record_wins(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with Journal.open(path) as journal:
        journal.append(_result(0, 0, status="failed", reward=None, error_type="timeout"))
        journal.append(_result(1, 0))
        journal.append(_result(0, 0, rollout_id="retry"))
    assert _mode(path) == 0o600
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert json.loads(lines[0])["error_type"] == "timeout"
    results = Journal.load(path)
    assert list(results) == [(1, 0), (0, 0)]
    assert results[(0, 0)].rollout_id == "retry"
    assert Journal.load(tmp_path / "missing.jsonl") == {}


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
        journal.append(_result(row))
    assert synced == [fd, fd, fd]
    journal.close()
    with pytest.raises(ValueError):
        journal.append(_result())


def test_an_existing_journal_is_narrowed_to_0600(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("")
    path.chmod(0o644)
    Journal.open(path).close()
    assert _mode(path) == 0o600


def _line(result: ItemResult) -> str:
    """The line `Journal.append` writes for `result`."""
    return json.dumps(result.to_json(), separators=(",", ":")) + "\n"


def test_a_torn_last_line_is_dropped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    whole = _line(_result(0)) + _line(_result(1))
    # Even a fragment that parses is dropped: its append never returned.
    for torn in ['{"row_index": 2, "run_in', json.dumps(_result(2).to_json())]:
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
        _line(_result(0)) + "garbage\n" + '{"kind": "other"}\n' + "\n" + _line(_result(1))
    )
    warnings: list[str] = []
    results = Journal.load(path, on_warning=warnings.append)
    assert list(results) == [(0, 0), (1, 0)]
    assert len(warnings) == 2
    assert ":2: skipped an invalid line" in warnings[0]
    assert ":3: skipped a record that is not a result" in warnings[1]


def test_warnings_go_to_the_log_by_default(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(_line(_result(0)) + "{")
    with caplog.at_level(logging.WARNING, logger="core.eval.journal"):
        assert list(Journal.load(path)) == [(0, 0)]
    assert "torn last line" in caplog.text


@pytest.mark.parametrize("tail", ['{"row_index": 1, "ru', "not json\n", "\x00\x00\x00\x00"])
def test_open_repairs_a_torn_tail_before_appending(tmp_path: Path, tail: str) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(_line(_result(0)) + tail)
    warnings: list[str] = []
    with Journal.open(path, on_warning=warnings.append) as journal:
        journal.append(_result(1))
    assert path.read_text() == _line(_result(0)) + _line(_result(1))
    assert len(warnings) == 1
    assert "repaired" in warnings[0]
    repaired: list[str] = []
    assert list(Journal.load(path, on_warning=repaired.append)) == [(0, 0), (1, 0)]
    assert repaired == []


def test_a_well_formed_record_of_another_shape_is_never_cut(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    text = _line(_result(0)) + '{"from": "a newer writer"}\n'
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
from core.eval.journal import Journal
from core.eval.records import ItemResult
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
            fragment = _line(_result(rng.randrange(7)))[: rng.randrange(1, 60)]
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


# -- transitions.jsonl ------------------------------------------------------------------------


def test_transition_records_and_their_shapes(tmp_path: Path) -> None:
    path = tmp_path / "transitions.jsonl"
    log = TransitionLog(path)
    log.record("r1", 0, 1, "queued", 0.0)
    log.record("r1", 0, 1, "running", 0.12345)
    log.admission_retry("r2", 1, 0, t=0.5, attempt=1, delay_s=0.25, server="http://a")
    log.cancel_request("r1", 0, 1, t=2, disposition="cancelled_running")
    log.cancel_request("r3", 2, 0, t=2.5, error="POST /rollout/cancel returned 500")
    log.close()
    log.close()  # idempotent
    assert _mode(path) == 0o600
    records = list(read_transitions(path))
    assert records[0]["kind"] == "session"
    assert records[0]["t"] == 0.0
    assert records[0]["started_at"].endswith("Z")
    assert records[1:] == [
        {"kind": "status", "rollout_id": "r1", "row_index": 0, "run_index": 1,
         "status": "queued", "t": 0.0},
        {"kind": "status", "rollout_id": "r1", "row_index": 0, "run_index": 1,
         "status": "running", "t": 0.123},
        {"kind": "admission_retry", "rollout_id": "r2", "row_index": 1, "run_index": 0,
         "t": 0.5, "attempt": 1, "status_code": 429, "delay_s": 0.25, "server": "http://a"},
        {"kind": "cancel_request", "rollout_id": "r1", "row_index": 0, "run_index": 1,
         "t": 2.0, "disposition": "cancelled_running"},
        {"kind": "cancel_request", "rollout_id": "r3", "row_index": 2, "run_index": 0,
         "t": 2.5, "error": "POST /rollout/cancel returned 500"},
    ]  # fmt: skip


def test_enum_statuses_are_written_as_their_values(tmp_path: Path) -> None:
    from core.types import CancelDisposition, RolloutStatus

    path = tmp_path / "transitions.jsonl"
    with TransitionLog(path) as log:
        log.record("r", 0, 0, RolloutStatus.GRADING, 1.0)
        log.cancel_request("r", 0, 0, t=1.0, disposition=CancelDisposition.NOT_FOUND)
    records = list(read_transitions(path))
    assert records[1]["status"] == "grading"
    assert records[2]["disposition"] == "not_found"


def test_transitions_reach_the_file_without_close(tmp_path: Path) -> None:
    path = tmp_path / "transitions.jsonl"
    log = TransitionLog(path, flush_interval_s=0.05)
    try:
        log.record("r", 0, 0, "running", log.elapsed())
        deadline = time.monotonic() + 2
        while b'"running"' not in path.read_bytes():
            assert time.monotonic() < deadline, "not flushed by the timer"
            time.sleep(0.01)
    finally:
        log.close()


def test_the_default_flush_interval_is_half_a_second(tmp_path: Path) -> None:
    log = TransitionLog(tmp_path / "t.jsonl")
    try:
        assert log._interval <= 0.5
        log.record("r", 0, 0, "running", 0.0)
        assert b"running" not in (tmp_path / "t.jsonl").read_bytes()  # buffered, not per record
    finally:
        log.close()


def test_elapsed_counts_from_the_session_start(tmp_path: Path) -> None:
    now = [100.0]
    log = TransitionLog(tmp_path / "t.jsonl", started_at=90.0, clock=lambda: now[0])
    try:
        assert log.elapsed() == 10.0
        assert log.elapsed(95.5) == 5.5
        now[0] = 101.0
        assert log.elapsed() == 11.0
    finally:
        log.close()


def test_a_resumed_session_is_appended_after_cutting_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "transitions.jsonl"
    with TransitionLog(path) as log:
        log.record("a", 0, 0, "queued", 0.0)
    with path.open("ab") as stream:
        stream.write(b'{"kind": "status", "rollout_')
    warnings: list[str] = []
    assert [r["kind"] for r in read_transitions(path, on_warning=warnings.append)] == [
        "session",
        "status",
    ]
    assert warnings == []  # a torn last line is the normal result of a crash
    with TransitionLog(path) as log:
        log.record("b", 1, 0, "queued", 0.0)
    records = list(read_transitions(path))
    assert [r["kind"] for r in records] == ["session", "status", "session", "status"]
    assert records[-1]["rollout_id"] == "b"


def test_read_transitions_skips_bad_lines_and_reads_kindless_ones_as_status(
    tmp_path: Path,
) -> None:
    path = tmp_path / "transitions.jsonl"
    path.write_text(
        '{"rollout_id": "a", "row_index": 0, "run_index": 0, "status": "queued", "t": 0}\n'
        "oops\n"
        "[1, 2]\n"
        '{"kind": "status"}\n'
        '{"kind": "cancel_request", "rollout_id": "a", "row_index": 0, "run_index": 0, "t": 1}\n'
    )
    warnings: list[str] = []
    records = list(read_transitions(path, on_warning=warnings.append))
    assert [r["kind"] for r in records] == ["status", "cancel_request"]
    assert len(warnings) == 3


# -- index.jsonl and metrics.json -------------------------------------------------------------


def test_index_has_one_row_per_work_item(tmp_path: Path) -> None:
    items = [WorkItem(row, run, row + 10) for row in (1, 0) for run in (1, 0)]
    results = {
        (0, 0): _result(0, 0),
        (0, 1): _result(0, 1, status="failed", reward=None, tokens=None, error_type="timeout"),
        (1, 1): _result(1, 1, status="skipped", reward=None),
    }
    rows = index_rows(items, results, resumed={(0, 0), (1, 0)})
    assert rows == [
        {"row_index": 0, "run_index": 0, "rollout_id": "id-0-0", "status": "success",
         "reward": 1.0, "tokens": 42, "duration_ms": 1234, "resumed": True},
        {"row_index": 0, "run_index": 1, "rollout_id": "id-0-1", "status": "failed",
         "duration_ms": 1234, "error_type": "timeout", "resumed": False},
        {"row_index": 1, "run_index": 0, "status": "pending", "resumed": False},
        {"row_index": 1, "run_index": 1, "rollout_id": "id-1-1", "status": "skipped",
         "tokens": 42, "duration_ms": 1234, "resumed": False},
    ]  # fmt: skip
    path = tmp_path / "index.jsonl"
    path.write_text("stale\n")
    write_index(path, rows)
    assert [json.loads(line) for line in path.read_text().splitlines()] == rows
    assert _mode(path) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.jsonl"]


def test_write_json_atomic_replaces_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    write_json_atomic(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    assert path.read_text().endswith("\n")
    assert _mode(path) == 0o600
    with pytest.raises(ValueError):
        write_json_atomic(path, {"a": float("nan")})
    assert json.loads(path.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_an_interrupted_atomic_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "index.jsonl"
    write_index(path, [{"row_index": 0}])

    def crash(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        write_index(path, [{"row_index": 1}])
    assert json.loads(path.read_text()) == {"row_index": 0}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.jsonl"]


# -- logs.txt ---------------------------------------------------------------------------------

SECRET = "sk-live-0123456789abcdef"
BEARER = "server-bearer-token-xyz"


def test_run_log_lines_are_timestamped_redacted_and_private(tmp_path: Path) -> None:
    path = tmp_path / "logs.txt"
    with RunLog(path, Redactor([SECRET, BEARER])) as log:
        log.write(f"starting with key {SECRET}")
        log.write(f"Authorization: Bearer {BEARER}\nsecond line\n", source="rollout-server")
    assert _mode(path) == 0o600
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    for line in lines:
        stamp, _, _rest = line.partition(" ")
        assert stamp.endswith("Z")
        datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert lines[0].endswith(" starting with key ***")
    assert lines[1].endswith(" [rollout-server] Authorization: Bearer ***")
    assert lines[2].endswith(" [rollout-server] second line")
    text = path.read_text()
    assert SECRET not in text and BEARER not in text


def test_run_log_as_a_logging_handler_redacts_messages_and_tracebacks(tmp_path: Path) -> None:
    path = tmp_path / "logs.txt"
    log = RunLog(path, Redactor([SECRET]))
    logger = logging.getLogger("tests.eval_results.runlog")
    handler = log.handler(logging.INFO)
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        logger.debug("not at this level")
        logger.info("request body %s", json.dumps({"llm_api_key": SECRET}))
        try:
            raise RuntimeError(f"upstream said: Authorization: Bearer {SECRET}")
        except RuntimeError:
            logger.exception("admission failed")
    finally:
        logger.removeHandler(handler)
        log.close()
    text = path.read_text()
    assert SECRET not in text
    assert "not at this level" not in text
    assert "INFO tests.eval_results.runlog: request body" in text
    assert "ERROR tests.eval_results.runlog: admission failed" in text
    assert "Traceback" in text
    # Writes after close (a handler left attached) are dropped, not raised.
    log.write("late")
    assert "late" not in path.read_text()


def test_a_symlinked_run_folder_is_followed_and_a_dangling_one_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "other-disk" / "r"
    elsewhere.parent.mkdir()
    RunFolder.open(elsewhere.parent, "r", _inputs(), fresh=False)
    output = tmp_path / "evals"
    output.mkdir()
    (output / "r").symlink_to(elsewhere)
    assert RunFolder.open(output, "r", _inputs(), fresh=False).resumed
    (output / "gone").symlink_to(tmp_path / "nowhere")
    with pytest.raises(RunFolderError):
        RunFolder.open(output, "gone", _inputs(), fresh=False)


def test_a_device_given_as_a_log_path_keeps_its_mode(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o644)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so opening for writing does not block
    try:
        RunLog(fifo).close()
    finally:
        os.close(reader)
    assert _mode(fifo) == 0o644
