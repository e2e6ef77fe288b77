"""A full disk or a read-only results folder (issue 7 §1): a clear error, nothing finished lost.

The results live on a small tmpfs mounted for the test (this needs root, which CI has); where
mounting is not allowed the disk-full and remount tests are skipped and the read-only one
falls back to a folder without write permission.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.eval.runs.command import RunningEval, run_eval, start_eval
from tests.eval.runs.files import multiply_rows, read_jsonl, summary_of, write_jsonl
from tests.eval.runs.servers import ServedDemo
from tests.polling import eventually_sync
from tests.reliability.filesystems import fill, remount, small_filesystem


@pytest.fixture
def tmpfs() -> Iterator[Path]:
    with small_filesystem("2m") as mountpoint:
        if mountpoint is None:
            pytest.skip("cannot mount a tmpfs here (needs root); see docs/RELIABILITY.md")
        yield mountpoint


def check_resume_completes(
    tmp_path: Path, args: tuple[str, ...], folder: Path, rows: int, kept: list[dict[str, object]]
) -> None:
    resumed = run_eval(*args, "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert summary_of(resumed.stdout)["items"]["resumed"] == len(kept)
    events = read_jsonl(folder / "events.jsonl")
    assert events[: len(kept)] == kept, "what was journaled before the failure is untouched"
    assert Counter(e["row_index"] for e in events) == Counter(range(rows))


def test_a_read_only_output_folder_is_a_clear_error_before_anything_runs(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(2))
    with small_filesystem("64k") as mountpoint:
        if mountpoint is not None:
            assert remount(mountpoint, read_only=True)
            output, reason = mountpoint / "out", "Read-only file system"
        else:  # not root: a folder we may not write to is the closest we can get
            output, reason = tmp_path / "locked" / "out", "Permission denied"
            output.parent.mkdir(mode=0o500)
        result = run_eval(
            *("--server", demo_server.url, "--dataset-file", str(dataset)),
            *("--output", str(output), "--name", "ro"),
            cwd=tmp_path,
        )
    assert result.returncode == 2, result.stderr
    assert f"osmosis-tui eval: cannot write the results under {output}: {reason}" in (result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def start_and_wait(
    tmp_path: Path, server: ServedDemo, output: Path, rows: int, name: str
) -> tuple[tuple[str, ...], Path, RunningEval]:
    dataset = write_jsonl(
        tmp_path / "rows.jsonl", multiply_rows(rows, metadata={"stub": "slow:0.1"})
    )
    args = (
        *("--server", server.url, "--dataset-file", str(dataset)),
        *("--output", str(output), "--name", name, "--max-in-flight", "4"),
    )
    folder = output / name
    run = start_eval(*args, cwd=tmp_path)
    eventually_sync(lambda: len(read_jsonl(folder / "events.jsonl")) >= 3, "3 finished items")
    return args, folder, run


def test_a_run_folder_gone_read_only_refuses_to_resume_and_keeps_its_results(
    tmp_path: Path, demo_server: ServedDemo, tmpfs: Path
) -> None:
    # (A filesystem cannot be remounted read-only under a process writing to it; a run
    # stopped by a kill, then resumed on the read-only folder, is the case users meet.)
    rows = 40
    args, folder, run = start_and_wait(tmp_path, demo_server, tmpfs / "out", rows, "ro")
    run.send_signal(signal.SIGKILL)
    run.finish()
    kept = read_jsonl(folder / "events.jsonl")
    assert remount(tmpfs, read_only=True)
    try:
        refused = run_eval(*args, cwd=tmp_path)
        still = read_jsonl(folder / "events.jsonl")
    finally:
        assert remount(tmpfs, read_only=False)
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert f"cannot write the results in {folder}: Read-only file system" in refused.stderr
    assert still == kept
    check_resume_completes(tmp_path, args, folder, rows, kept)


def test_a_full_disk_mid_run_stops_it_and_keeps_every_finished_item(
    tmp_path: Path, demo_server: ServedDemo, tmpfs: Path
) -> None:
    rows = 80  # enough records to need a new page of events.jsonl once the disk is full
    args, folder, run = start_and_wait(tmp_path, demo_server, tmpfs / "out", rows, "full")
    filler = fill(tmpfs)
    try:
        stdout, stderr = run.finish()
        kept = read_jsonl(folder / "events.jsonl")
    finally:
        filler.unlink()
    assert run.returncode == 1, stderr
    assert "Traceback" not in stderr
    assert "No space left on device" in stdout
    assert "cannot write events.jsonl: No space left on device" in stdout
    assert 3 <= len(kept) < rows
    raw = (folder / "events.jsonl").read_bytes()
    assert raw.endswith(b"\n"), "no torn record left behind by the failed append"
    assert len({e["row_index"] for e in kept}) == len(kept)
    check_resume_completes(tmp_path, args, folder, rows, kept)
    assert os.stat(folder / "events.jsonl").st_mode & 0o777 == 0o600
