"""The manifest's provenance (EVAL.md §8): the official keys in the official order."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from core.eval.results.provenance import git_state, manifest_pass_threshold, run_provenance


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_provenance_of_a_workspace_in_git(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "configs" / "eval").mkdir(parents=True)
    config = workspace / "configs" / "eval" / "demo.toml"
    config.write_text("")
    _git(workspace, "init", "-q", "-b", "main")
    _git(workspace, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(workspace, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    provenance = run_provenance(
        workspace=workspace,
        config_path=config,
        config_branch="feature-x",
        advanced={"foo": 1},
        pass_threshold=1,
    )
    assert list(provenance) == [
        "sdk_version",
        "config_branch",
        "config_path",
        "advanced",
        "git_head",
        "git_branch",
        "git_dirty",
        "osmosis_tui_version",
        "pass_threshold",
    ]
    assert provenance["sdk_version"] == "0.3.8"
    assert provenance["pass_threshold"] == 1.0 and type(provenance["pass_threshold"]) is float
    assert provenance["config_path"] == "configs/eval/demo.toml"
    assert len(provenance["git_head"]) == 40
    assert provenance["git_branch"] == "main"
    assert provenance["git_dirty"] is False
    (workspace / "new.txt").write_text("untracked")
    assert git_state(workspace)["git_dirty"] is True
    _git(workspace, "checkout", "-q", "--detach")
    assert "git_branch" not in git_state(workspace)
    # Only the top of a worktree counts, as official.
    assert git_state(workspace / "configs") == {}


def test_provenance_without_a_workspace_or_git(tmp_path: Path) -> None:
    provenance = run_provenance(workspace=None, config_path=None)
    assert list(provenance) == ["sdk_version", "osmosis_tui_version"]
    outside = run_provenance(workspace=tmp_path / "ws", config_path=tmp_path / "x.toml")
    assert "config_path" not in outside  # a config outside the workspace has no portable path
    assert "git_head" not in outside


def test_the_pass_threshold_a_manifest_says() -> None:
    manifest = {"provenance": run_provenance(workspace=None, config_path=None, pass_threshold=0.5)}
    assert manifest_pass_threshold(manifest) == 0.5
    # An official manifest (or an older one of ours) does not say; nor does anything else.
    others: list[object] = [{"provenance": {"sdk_version": "0.3.8"}}, {}, [], None]
    for document in others:
        assert manifest_pass_threshold(document) is None
    assert manifest_pass_threshold({"provenance": {"pass_threshold": True}}) is None
