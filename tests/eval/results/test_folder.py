"""The run folder (EVAL.md §8): run names, creating the manifest, resume and --fresh."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from core.eval.results.folder import (
    ResumeRefused,
    RunFolder,
    RunFolderError,
    archive_name,
    default_run_name,
    validate_run_name,
)
from tests.eval.results.helpers import file_mode, official_inputs

PROVENANCE = {"sdk_version": "0.3.8", "config_path": "configs/eval/demo.toml"}


def _open(output: Path, name: str, *, fresh: bool = False, **changes: Any) -> RunFolder:
    return RunFolder.open(
        output, name, official_inputs(**changes), fresh=fresh, provenance=PROVENANCE
    )


def test_a_new_run_folder_gets_a_private_folder_a_manifest_and_rollout_trials(
    tmp_path: Path,
) -> None:
    output = tmp_path / ".osmosis" / "evals"
    run = _open(output, "demo-1")
    assert run.path == output / "demo-1"
    assert not run.resumed
    assert file_mode(run.path) == 0o700
    assert file_mode(run.manifest_path) == 0o600
    assert run.trials_dir.is_dir() and not any(run.trials_dir.iterdir())
    manifest = json.loads(run.manifest_path.read_text())
    assert list(manifest) == [
        "schema_version",
        "local_run_id",
        "run_name",
        "created_at",
        "inputs",
        "provenance",
    ]
    assert manifest["run_name"] == "demo-1"
    assert manifest["inputs"] == official_inputs()
    assert manifest["provenance"] == PROVENANCE
    assert run.local_run_id == manifest["local_run_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", run.local_run_id)
    assert run.created_at == manifest["created_at"]
    # Written as official: indent 2, a trailing newline.
    assert run.manifest_path.read_text() == json.dumps(manifest, indent=2) + "\n"
    assert [p.name for p in tmp_path.rglob(".*.tmp")] == []


def test_reopening_with_the_same_inputs_resumes_and_keeps_the_manifest(tmp_path: Path) -> None:
    first = _open(tmp_path, "r")
    written = first.manifest_path.read_bytes()
    first.events_path.write_text("")
    # 60 is the same timeout as 60.0.
    again = _open(tmp_path, "r", timeouts={"agent_timeout_sec": 60, "grader_timeout_sec": 30.0})
    assert again.resumed
    assert again.local_run_id == first.local_run_id
    assert again.manifest_path.read_bytes() == written  # never rewritten: upload hashes it
    assert again.events_path.exists()


def test_a_resume_with_changed_inputs_is_refused_naming_the_top_level_keys(
    tmp_path: Path,
) -> None:
    _open(tmp_path, "r")
    dataset = {"sha256": "cd" * 32, "selected_source_rows": "0-4"}
    with pytest.raises(ResumeRefused) as caught:
        _open(tmp_path, "r", dataset=dataset, n=4, env={})
    refused = caught.value
    assert refused.changed_keys == ["dataset", "env", "n"]
    message = str(refused)
    assert "changed: dataset, env, n;" in message
    assert "--fresh" in message
    assert isinstance(refused, RunFolderError)


def test_fresh_archives_the_old_folder_as_official_and_starts_clean(tmp_path: Path) -> None:
    old = _open(tmp_path, "r")
    old.events_path.write_text("kept\n")
    first = _open(tmp_path, "r", fresh=True, n=8)
    assert not first.resumed
    assert first.local_run_id != old.local_run_id
    assert first.archived is not None
    assert re.fullmatch(r"r\.archive-\d{8}T\d{6}Z(-\d+)?", first.archived.name)
    assert (first.archived / "events.jsonl").read_text() == "kept\n"
    assert sorted(p.name for p in first.path.iterdir()) == ["manifest.json", "rollout_trials"]
    second = _open(tmp_path, "r", fresh=True)
    assert second.archived is not None
    assert second.archived != first.archived  # same second: a numbered name
    assert second.archived.exists() and first.archived.exists()


def test_archive_names_count_from_one_within_a_second(tmp_path: Path) -> None:
    moment = datetime(2026, 12, 1, 8, 51, 32, tzinfo=timezone.utc)
    folder = tmp_path / "intr"
    assert archive_name(folder, now=moment).name == "intr.archive-20261201T085132Z"
    (tmp_path / "intr.archive-20261201T085132Z").mkdir()
    assert archive_name(folder, now=moment).name == "intr.archive-20261201T085132Z-1"
    (tmp_path / "intr.archive-20261201T085132Z-1").mkdir()
    assert archive_name(folder, now=moment).name == "intr.archive-20261201T085132Z-2"


def test_fresh_without_an_existing_folder_just_creates_it(tmp_path: Path) -> None:
    run = _open(tmp_path, "r", fresh=True)
    assert run.archived is None
    assert run.manifest_path.exists()


def test_an_empty_folder_is_adopted_but_a_foreign_one_is_not(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert not _open(tmp_path, "empty").resumed
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    with pytest.raises(RunFolderError, match="--fresh"):
        _open(tmp_path, "foreign")
    (tmp_path / "afile").write_text("")
    with pytest.raises(RunFolderError):
        _open(tmp_path, "afile")


@pytest.mark.parametrize(
    "manifest", ["{not json", "[]", '{"schema_version": 2, "inputs": {}}', '{"schema_version": 1}']
)
def test_an_unreadable_manifest_is_an_input_error(tmp_path: Path, manifest: str) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "manifest.json").write_text(manifest)
    with pytest.raises(RunFolderError, match="--fresh"):
        _open(tmp_path, "r")


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a/b", "a\\b", ".hidden", "-x", "_x", "a\nb", "a b", ".locks", "x" * 97],
)
def test_names_the_official_tool_refuses_are_refused(name: str) -> None:
    with pytest.raises(RunFolderError):
        validate_run_name(name)


@pytest.mark.parametrize("name", ["r1", "calm-raven-12", "v1.2_final", "x" * 96, "été-1"])
def test_names_the_official_tool_accepts_are_accepted(name: str) -> None:
    assert validate_run_name(name) == name


def test_default_run_names() -> None:
    now = datetime(2025, 3, 4, 5, 6, 7)
    assert default_run_name("multiply", now=now) == "multiply-20250304-050607"
    assert default_run_name("my eval/v2", now=now) == "my-eval-v2-20250304-050607"
    assert default_run_name("..", now=now) == "eval-20250304-050607"
    assert default_run_name("_private", now=now) == "private-20250304-050607"
    validate_run_name(default_run_name("x" * 300))


def test_a_symlinked_run_folder_is_followed_and_a_dangling_one_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "other-disk" / "r"
    elsewhere.parent.mkdir()
    _open(elsewhere.parent, "r")
    output = tmp_path / "evals"
    output.mkdir()
    (output / "r").symlink_to(elsewhere)
    assert _open(output, "r").resumed
    (output / "gone").symlink_to(tmp_path / "nowhere")
    with pytest.raises(RunFolderError):
        _open(output, "gone")
