"""`provenance` of the manifest (EVAL.md §8): what ran, recorded but never compared.

The official keys, in the official order, each left out when it has no value:
`sdk_version` (the osmosis-ai release whose results folder this is), `config_branch` and
`config_commit_sha` (`experiment.branch` / `commit_sha`), `config_path` (the config's path in
the workspace, POSIX form; left out for a config outside it), `advanced` (the config's
`[advanced]` table, when not empty), then, when the workspace is the top of a git worktree,
`git_head`, `git_branch` (left out on a detached HEAD) and `git_dirty`. Ours after them:
`osmosis_tui_version` and `pass_threshold` (the threshold the run counts passes with, which
the official manifest leaves out of `inputs` on purpose: a replay of a run killed before its
first metrics.json still counts as the run did). The official upload forwards only its own
keys.

Computed on every invocation; only the one that creates the run folder stores it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from core.eval.results.manifest import OFFICIAL_SDK_VERSION

GIT_TIMEOUT_SEC = 10.0


def _git(workspace: Path, *args: str) -> str | None:
    """`git -C workspace args` stdout, stripped; None when git fails or is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(workspace), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SEC,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(workspace: Path) -> dict[str, Any]:
    """`git_head`, `git_branch` and `git_dirty` of `workspace`; `{}` when it is not the top
    of a git worktree (as official: a subfolder of one does not count)."""
    if shutil.which("git") is None or not (workspace / ".git").exists():
        return {}
    head = _git(workspace, "rev-parse", "HEAD")
    if head is None:
        return {}  # a repository without commits
    branch = _git(workspace, "rev-parse", "--abbrev-ref", "HEAD")
    porcelain = _git(workspace, "status", "--porcelain")
    state: dict[str, Any] = {"git_head": head}
    if branch is not None and branch != "HEAD":  # "HEAD": detached
        state["git_branch"] = branch
    state["git_dirty"] = bool(porcelain)
    return state


def _own_version() -> str | None:
    try:
        return metadata.version("osmosis-tui")
    except metadata.PackageNotFoundError:
        return None


def run_provenance(
    *,
    workspace: Path | None,
    config_path: Path | None,
    config_branch: str | None = None,
    config_commit_sha: str | None = None,
    advanced: Mapping[str, Any] | None = None,
    pass_threshold: float | None = None,
) -> dict[str, Any]:
    """The manifest's `provenance` for a run of `config_path` in `workspace` (both None for
    a run without a workspace: the demo, or servers given by URL alone)."""
    relative: str | None = None
    if workspace is not None and config_path is not None:
        try:
            relative = config_path.resolve().relative_to(workspace.resolve()).as_posix()
        except ValueError:
            relative = None  # outside the workspace: an absolute path means nothing elsewhere
    provenance: dict[str, Any] = {
        "sdk_version": OFFICIAL_SDK_VERSION,
        "config_branch": config_branch,
        "config_commit_sha": config_commit_sha,
        "config_path": relative,
        "advanced": dict(advanced) if advanced else None,
        **(git_state(workspace) if workspace is not None else {}),
        "osmosis_tui_version": _own_version(),
        "pass_threshold": None if pass_threshold is None else float(pass_threshold),
    }
    return {key: value for key, value in provenance.items() if value is not None}


def manifest_pass_threshold(manifest: object) -> float | None:
    """The pass threshold a `manifest.json` document says its run was created with; None
    when it does not say (an official run's, or an older one of ours)."""
    provenance = manifest.get("provenance") if isinstance(manifest, dict) else None
    threshold = provenance.get("pass_threshold") if isinstance(provenance, dict) else None
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        return None
    return float(threshold)


__all__ = ["git_state", "manifest_pass_threshold", "run_provenance"]
