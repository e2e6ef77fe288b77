"""The run folder (EVAL.md §6): run names, the manifest, resume and --fresh."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from core.eval.results.folder import (
    ResumeRefused,
    RunFolder,
    RunFolderError,
    default_run_name,
    manifest_inputs,
    validate_run_name,
)
from tests.eval_results.helpers import file_mode


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


def test_a_new_run_folder_gets_a_private_folder_and_a_manifest(tmp_path: Path) -> None:
    output = tmp_path / ".osmosis" / "evals"
    run = RunFolder.open(output, "demo-1", _inputs(), fresh=False)
    assert run.path == output / "demo-1"
    assert not run.resumed
    assert file_mode(run.path) == 0o700
    assert file_mode(run.manifest_path) == 0o600
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
