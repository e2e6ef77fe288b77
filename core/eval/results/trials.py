"""`rollout_trials/<rollout_id>/`: what the rollout server wrote for each attempt (EVAL.md §8).

The run folder's `rollout_trials/` is the artifact root of the rollout server
(`_OSMOSIS_ROLLOUT_ARTIFACT_ROOT`); everything in it is the server's, never ours: per attempt,
`trajectory.json` (an ATIF document) and `artifacts/` (the grader's files). This module reads
it the way the official tool does, for the index and the projections:

- A trajectory counts only when it parses as a JSON object whose rollout identity is the
  folder's id: `extra.osmosis.rollout_id`, else `session_id`, else the part of
  `trajectory_id` before its first `/` (a `trajectory_id` without one does not count; the
  platform drops such a document).
- Its `final_metrics.total_prompt_tokens` + `total_completion_tokens` stand in for a result
  that has no token count of its own.
- The artifacts that count are the regular files under `artifacts/`, never through a
  symlink, never outside it, without a top-level `manifest.json` (reserved by the platform).

Verdicts are cached by the file's size and modification time: the index re-checks every
attempt at every refresh, and a run may have thousands.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.eval.token_counts import token_count
from core.eval.untrusted_json import load_json_file

logger = logging.getLogger(__name__)

TRAJECTORY_FILE = "trajectory.json"
ARTIFACTS_DIR = "artifacts"
RESERVED_ARTIFACT = "manifest.json"
_TOKEN_KEYS = ("total_prompt_tokens", "total_completion_tokens")


def trajectory_identity(document: Mapping[str, Any]) -> str | None:
    """The rollout id an ATIF document names, as the platform reads it (None: none)."""
    extra = document.get("extra")
    osmosis = extra.get("osmosis") if isinstance(extra, Mapping) else None
    if isinstance(osmosis, Mapping):
        rollout_id = osmosis.get("rollout_id")
        if isinstance(rollout_id, str) and rollout_id:
            return rollout_id
    session_id = document.get("session_id")
    if isinstance(session_id, str) and session_id:
        return session_id
    trajectory_id = document.get("trajectory_id")
    if isinstance(trajectory_id, str) and "/" in trajectory_id:
        return trajectory_id.split("/", 1)[0] or None
    return None


def trajectory_tokens(document: Mapping[str, Any]) -> int | None:
    """Prompt plus completion tokens from the document's `final_metrics` (either may be
    missing, or not a token count: `core.eval.token_counts`; None when neither is one)."""
    metrics = document.get("final_metrics")
    if not isinstance(metrics, Mapping):
        return None
    counts = [
        count
        for count in map(token_count, (metrics.get(key) for key in _TOKEN_KEYS))
        if count is not None
    ]
    return sum(counts) if counts else None


@dataclass(frozen=True)
class Trajectory:
    """A valid trajectory of one attempt: its tokens (see `trajectory_tokens`)."""

    tokens: int | None


def read_trajectory(path: Path, rollout_id: str) -> Trajectory | None:
    """The trajectory at `path` when it is one of `rollout_id`; else None (absent, not JSON,
    not an object, or another rollout's)."""
    try:
        document = load_json_file(path)
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or trajectory_identity(document) != rollout_id:
        return None
    return Trajectory(tokens=trajectory_tokens(document))


def artifact_files(artifacts: Path) -> list[Path]:
    """The artifact files of one attempt, relative to `artifacts`, sorted; unsafe entries
    (symlinks, paths that leave the folder) are skipped with a warning, never copied."""
    if artifacts.is_symlink():
        logger.warning("skipped the symlinked artifact folder %s", artifacts)
        return []
    if not artifacts.is_dir():
        return []
    root = artifacts.resolve()
    found: list[Path] = []
    for folder, dirnames, filenames in os.walk(artifacts, followlinks=False):
        here = Path(folder)
        for name in dirnames:
            if (here / name).is_symlink():
                logger.warning("skipped the artifact symlink %s", here / name)
        for name in filenames:
            path = here / name
            relative = path.relative_to(artifacts)
            if path.is_symlink():
                logger.warning("skipped the artifact symlink %s", path)
            elif not path.is_file():
                continue
            elif relative.parts == (RESERVED_ARTIFACT,):
                continue  # the platform's own index of a rollout's files
            elif not path.resolve().is_relative_to(root):
                logger.warning("skipped the artifact %s outside its folder", path)
            else:
                found.append(relative)
    return sorted(found)


class TrialsView:
    """Reads `rollout_trials/`, remembering each attempt's trajectory verdict until its file
    changes."""

    def __init__(self, trials_dir: Path) -> None:
        self.trials_dir = trials_dir
        self._verdicts: dict[str, tuple[tuple[int, int], Trajectory | None]] = {}

    def trajectory_path(self, rollout_id: str) -> Path:
        return self.trials_dir / rollout_id / TRAJECTORY_FILE

    def artifacts_dir(self, rollout_id: str) -> Path:
        return self.trials_dir / rollout_id / ARTIFACTS_DIR

    def trajectory(self, rollout_id: str) -> Trajectory | None:
        """The valid trajectory of `rollout_id`'s attempt, or None."""
        path = self.trajectory_path(rollout_id)
        try:
            info = path.stat()
        except OSError:
            # No file, nothing to remember: a run whose servers write no trajectory here would
            # otherwise keep an entry for each of its items.
            self._verdicts.pop(rollout_id, None)
            return None
        version = (info.st_mtime_ns, info.st_size)
        cached = self._verdicts.get(rollout_id)
        if cached is not None and cached[0] == version:
            return cached[1]
        verdict = read_trajectory(path, rollout_id)
        self._verdicts[rollout_id] = (version, verdict)
        return verdict


__all__ = [
    "ARTIFACTS_DIR",
    "RESERVED_ARTIFACT",
    "TRAJECTORY_FILE",
    "Trajectory",
    "TrialsView",
    "artifact_files",
    "read_trajectory",
    "trajectory_identity",
    "trajectory_tokens",
]
