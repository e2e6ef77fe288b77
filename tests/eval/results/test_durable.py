"""Atomic replacement of a results file: whole or not at all, mode 0600."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core.eval.results.durable import write_bytes_atomic, write_json_atomic
from tests.eval.results.helpers import file_mode


def test_write_json_atomic_replaces_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    write_json_atomic(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    assert path.read_text().endswith("\n")
    assert file_mode(path) == 0o600
    with pytest.raises(ValueError):
        write_json_atomic(path, {"a": float("nan")})
    assert json.loads(path.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_an_interrupted_atomic_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "index.jsonl"
    write_bytes_atomic(path, b'{"row_index": 0}\n')

    def crash(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        write_bytes_atomic(path, b'{"row_index": 1}\n')
    assert json.loads(path.read_text()) == {"row_index": 0}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.jsonl"]
