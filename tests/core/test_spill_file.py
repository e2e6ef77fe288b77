"""SpillFile: bytes written to an unlinked file in a folder and read back by key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from core.spill_file import SpillFile


def test_what_is_put_reads_back_by_its_key_in_any_order(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    entries = [b'{"status":"success"}', b"", "naïve ✓".encode(), bytes(range(256)) * 300]
    keys = [spill.put(data) for data in entries]
    assert None not in keys
    for key, data in reversed(list(zip(keys, entries, strict=True))):
        assert key is not None and spill.get(key) == data
    # Unlinked from the start: nothing in the folder, whatever ends the process.
    assert list(tmp_path.iterdir()) == []


def test_an_object_put_reads_back_as_an_equal_copy(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    calls = [{"role": "user", "content": "What is 6 * 7?"}, ("42", 1.5, None)]
    key = spill.put_object(calls)
    assert key is not None
    copy = spill.get_object(key)
    assert copy == calls and copy is not calls


def test_a_key_of_nothing_written_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        SpillFile(tmp_path).get(0)


def test_a_folder_it_cannot_write_in_keeps_the_bytes_with_the_caller(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gone = tmp_path / "removed"
    spill = SpillFile(gone)
    with caplog.at_level(logging.WARNING, logger="core.spill_file"):
        assert spill.put(b"one") is None
        assert spill.put(b"two") is None
    # Said once, naming the folder; the run goes on with what it holds in memory.
    assert len(caplog.records) == 1 and str(gone) in caplog.records[0].getMessage()
