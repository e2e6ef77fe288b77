"""Reading `rollout_trials/<id>/` (EVAL.md §8): valid trajectories and safe artifacts."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from core.eval.results.trials import (
    TrialsView,
    artifact_files,
    read_trajectory,
    trajectory_identity,
    trajectory_tokens,
)
from tests.eval.results.helpers import RID, atif


@pytest.mark.parametrize(
    ("document", "identity"),
    [
        (atif(), RID),
        ({"extra": {"osmosis": {"rollout_id": "a"}}, "session_id": "b"}, "a"),
        ({"session_id": "b", "trajectory_id": "c/1"}, "b"),
        ({"trajectory_id": "c/1"}, "c"),
        ({"trajectory_id": "c"}, None),  # no "/": the platform drops such a document
        ({"extra": {"osmosis": {"rollout_id": ""}}}, None),
        ({}, None),
    ],
)
def test_trajectory_identity(document: dict[str, Any], identity: str | None) -> None:
    assert trajectory_identity(document) == identity


def test_trajectory_tokens_add_what_is_there() -> None:
    assert trajectory_tokens(atif()) is None
    metrics = {"total_prompt_tokens": 10, "total_completion_tokens": 3}
    assert trajectory_tokens({"final_metrics": metrics}) == 13
    assert trajectory_tokens({"final_metrics": {"total_completion_tokens": 3}}) == 3
    assert trajectory_tokens({"final_metrics": {"total_prompt_tokens": True}}) is None


@pytest.mark.parametrize("odd", [-5, 2.5, 10**30, float("nan"), float("inf"), "7"])
def test_trajectory_token_counts_that_are_no_counts_are_left_out(odd: object) -> None:
    # A negative or absurd count would be written into index.jsonl and summed in metrics.
    metrics = {"total_prompt_tokens": odd, "total_completion_tokens": 3}
    assert trajectory_tokens({"final_metrics": metrics}) == 3
    assert trajectory_tokens({"final_metrics": {"total_prompt_tokens": odd}}) is None
    assert trajectory_tokens({"final_metrics": {"total_prompt_tokens": 4.0}}) == 4


def test_only_a_trajectory_of_this_rollout_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    assert read_trajectory(path, RID) is None
    # A server's file nested too deeply to parse used to raise RecursionError at every
    # refresh of the index: the run could not finish.
    for text in ("{", "[]", json.dumps(atif("someone-else")), "[" * 100_000):
        path.write_text(text)
        assert read_trajectory(path, RID) is None
    path.write_text(json.dumps(atif(final_metrics={"total_prompt_tokens": 4})))
    trajectory = read_trajectory(path, RID)
    assert trajectory is not None and trajectory.tokens == 4


def test_the_view_re_reads_a_trajectory_only_when_it_changes(tmp_path: Path) -> None:
    view = TrialsView(tmp_path)
    assert view.trajectory(RID) is None
    path = view.trajectory_path(RID)
    path.parent.mkdir()
    path.write_text(json.dumps(atif()))
    assert view.trajectory(RID) is not None
    path.write_text(json.dumps(atif("other-rollout-id")))  # another size: read again
    assert view.trajectory(RID) is None
    path.write_text(json.dumps(atif()))
    assert view.trajectory(RID) is not None
    path.unlink()  # gone: no trajectory, whatever was read before
    assert view.trajectory(RID) is None


def test_artifact_files_skip_links_and_the_reserved_manifest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    artifacts = tmp_path / "artifacts"
    (artifacts / "sub").mkdir(parents=True)
    (artifacts / "grade.json").write_text("{}")
    (artifacts / "sub" / "manifest.json").write_text("nested: kept")
    (artifacts / "manifest.json").write_text("top level: reserved")
    (tmp_path / "secret").write_text("host file")
    (artifacts / "leak").symlink_to(tmp_path / "secret")
    (artifacts / "dir-link").symlink_to(tmp_path)
    os.mkfifo(artifacts / "pipe")
    with caplog.at_level(logging.WARNING, logger="core.eval.results.trials"):
        assert artifact_files(artifacts) == [Path("grade.json"), Path("sub/manifest.json")]
    assert "leak" in caplog.text and "dir-link" in caplog.text
    assert artifact_files(tmp_path / "none") == []
    (tmp_path / "linked").symlink_to(artifacts)
    assert artifact_files(tmp_path / "linked") == []
