"""The run folder of an eval run and its names (EVAL.md §8).

`<output>/<run-name>/` (mode 0700) holds, each file written by its own module, in the
official shapes (osmosis-ai 0.3.8) so that either tool resumes the other's runs:

- `manifest.json` (`core.eval.results.manifest`): the resume lock, written once here.
- `events.jsonl` (`core.eval.results.events`): the journal, the only authority for resume.
- `index.jsonl` and its copy `summary.jsonl` (`core.eval.results.index`), `progress.json`
  (`core.eval.results.progress`), `metrics.json` (`core.eval.results.metrics`): snapshots
  rebuilt from the journal, `trajectories/` and `artifacts/` (`core.eval.results.projections`)
  copies out of `rollout_trials/`, the artifact root of the rollout server
  (`core.eval.results.trials`).
- `logs.txt` (`core.eval.results.logs`): timestamped lines, secrets redacted.
- ours, which the official tools ignore: `transitions.jsonl` (`core.eval.results.transitions`),
  read by `osmosis-tui replay`, `calls.jsonl` (`core.eval.results.calls`), one line per
  model call through the gateway, and `previews/`, the live preview root of the rollout
  servers (`<rollout_id>/preview.json`, PROTOCOL.md §8.2), read by the dashboard's transcript,
  and, while the run lives, `control.sock` (`core.eval.attach.unix_socket`), where
  `osmosis-tui attach` reaches it.

`<output>/.locks/<run-name>.lock` (`core.eval.results.lock`) keeps a second run of the same
name out while one lives. Every file is created with mode 0600 (`core.eval.results.durable`).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core.eval.errors import EvalError
from core.eval.results.durable import (
    FOLDER_MODE,
    describe_os_error,
    fsync_dir,
    make_folders,
    write_json_atomic,
)
from core.eval.results.manifest import (
    ManifestError,
    changed_input_keys,
    new_manifest,
    read_manifest,
)
from core.eval.results.records import is_path_segment

logger = logging.getLogger(__name__)

MANIFEST_FILE = "manifest.json"
EVENTS_FILE = "events.jsonl"
TRANSITIONS_FILE = "transitions.jsonl"
INDEX_FILE = "index.jsonl"
SUMMARY_FILE = "summary.jsonl"
PROGRESS_FILE = "progress.json"
METRICS_FILE = "metrics.json"
LOGS_FILE = "logs.txt"
CALLS_FILE = "calls.jsonl"
TRIALS_DIR = "rollout_trials"
TRAJECTORIES_DIR = "trajectories"
ARTIFACTS_DIR = "artifacts"
PREVIEWS_DIR = "previews"
CONTROL_SOCKET_FILE = "control.sock"
LOCKS_DIR = ".locks"

# As official, so that a name one tool accepts the other accepts too.
RUN_NAME_MAX_LENGTH = 96
FRESH_HINT = (
    "restart it under the same name with --fresh (the old folder is archived, never "
    "deleted), or give --name for a new run"
)


# -- errors -----------------------------------------------------------------------------------


class RunFolderError(EvalError):
    """The run folder cannot be used as asked: bad input, exit status 2 (EVAL.md §2)."""


class ResumeRefused(RunFolderError):
    """A resume would change inputs the run was created with.

    `changed_keys` are the top-level keys of the manifest's `inputs` that differ, e.g.
    `dataset` (as the official tool names them).
    """

    def __init__(self, run_name: str, folder: Path, changed_keys: list[str]) -> None:
        self.run_name = run_name
        self.folder = folder
        self.changed_keys = changed_keys
        super().__init__(
            f"run {run_name!r} ({folder}) was created with different inputs, so resuming it "
            f"would mix them in one set of results; changed: {', '.join(changed_keys)}; "
            f"{FRESH_HINT}"
        )


# -- run names and the run folder -------------------------------------------------------------

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_STAMP_LENGTH = len("-YYYYmmdd-HHMMSS")


def _timestamp(moment: datetime | None = None) -> str:
    # Local time: the name is read by the person who started the run.
    return (moment or datetime.now()).strftime("%Y%m%d-%H%M%S")


def default_run_name(config_or_dataset_stem: str, *, now: datetime | None = None) -> str:
    """`<stem>-YYYYmmdd-HHMMSS` (local time); the stem is reduced to `[A-Za-z0-9._-]`
    starting with a letter or digit, so the name is valid for both tools."""
    stem = _NAME_UNSAFE.sub("-", config_or_dataset_stem).strip("._-") or "eval"
    stem = stem[: RUN_NAME_MAX_LENGTH - _STAMP_LENGTH]
    return f"{stem}-{_timestamp(now)}"


def validate_run_name(name: str) -> str:
    """`name` if the official tool would accept it too; else `RunFolderError`.

    One path segment of at most 96 characters, not `.locks` (the lock folder), starting with
    a letter or digit, then letters, digits, `.`, `_` or `-`.
    """
    if not name:
        raise RunFolderError("run name must not be empty")
    if len(name) > RUN_NAME_MAX_LENGTH:
        raise RunFolderError(f"run name must be at most {RUN_NAME_MAX_LENGTH} characters")
    if not is_path_segment(name):
        raise RunFolderError(f"run name {name!r} must be a single path segment")
    if name == LOCKS_DIR:
        raise RunFolderError(f"run name {name!r} is reserved (it holds the run locks)")
    # A leading dot hides the folder; a leading dash reads as an option in shells.
    if not name[0].isalnum() or any(not (c.isalnum() or c in "._-") for c in name):
        raise RunFolderError(
            f"run name {name!r} must start with a letter or digit and use only letters, "
            "digits, '.', '_' and '-'"
        )
    return name


def archive_name(folder: Path, *, now: datetime | None = None) -> Path:
    """Where `--fresh` moves `folder`: `<name>.archive-<UTC %Y%m%dT%H%M%SZ>`, then `-1`,
    `-2`, ... while that name is taken (as official)."""
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    base = f"{folder.name}.archive-{moment.strftime('%Y%m%dT%H%M%SZ')}"
    candidate = folder.with_name(base)
    suffix = 1
    while candidate.exists() or candidate.is_symlink():
        candidate = folder.with_name(f"{base}-{suffix}")
        suffix += 1
    return candidate


@dataclass(frozen=True)
class RunFolder:
    """An opened `<output>/<run-name>/` folder; `resumed` when it existed with a manifest."""

    path: Path
    run_name: str
    manifest: dict[str, Any]
    resumed: bool
    archived: Path | None = None

    @classmethod
    def open(
        cls,
        output: Path,
        name: str,
        inputs: Mapping[str, Any],
        *,
        fresh: bool,
        provenance: Mapping[str, Any] | None = None,
    ) -> RunFolder:
        """Create the run folder, or reopen it for resume.

        Resume requires the stored `inputs` to equal `inputs` (`ResumeRefused` names the
        changed top-level keys). `fresh=True` archives an existing folder as
        `<name>.archive-<UTC stamp>` (never deletes it) and starts clean. A folder that
        exists without a manifest is adopted only when empty (a crash right after mkdir);
        otherwise it is not ours. `provenance` goes into a new manifest only.
        """
        validate_run_name(name)
        try:
            return cls._open(output, name, inputs, fresh=fresh, provenance=provenance or {})
        except OSError as exc:
            # A read-only or full disk, or a folder we may not write: said plainly, before
            # any rollout runs.
            raise RunFolderError(
                f"cannot write the results under {output}: {describe_os_error(exc)}"
            ) from exc

    @classmethod
    def _open(
        cls,
        output: Path,
        name: str,
        inputs: Mapping[str, Any],
        *,
        fresh: bool,
        provenance: Mapping[str, Any],
    ) -> RunFolder:
        output.mkdir(parents=True, exist_ok=True)
        folder = output / name
        archived: Path | None = None
        if fresh and (folder.exists() or folder.is_symlink()):
            archived = archive_name(folder)
            os.replace(folder, archived)
            fsync_dir(output)
        # A symlink to a folder is followed (a run moved to another disk); anything else that
        # holds the name, a dangling link included, is not a run folder.
        dangling = folder.is_symlink() and not folder.exists()
        if dangling or (folder.exists() and not folder.is_dir()):
            raise RunFolderError(f"{folder} exists and is not a run folder; {FRESH_HINT}")
        manifest_path = folder / MANIFEST_FILE
        if folder.is_dir():
            if manifest_path.exists():
                manifest = cls._read_manifest(manifest_path, name)
                changed = changed_input_keys(manifest["inputs"], inputs)
                if changed:
                    raise ResumeRefused(name, folder, changed)
                make_folders(folder / TRIALS_DIR)
                return cls(folder, name, manifest, resumed=True)
            if any(folder.iterdir()):
                raise RunFolderError(
                    f"{folder} exists but has no {MANIFEST_FILE}, so it is not an eval run "
                    f"folder; {FRESH_HINT}"
                )
        else:
            folder.mkdir(mode=FOLDER_MODE)
            fsync_dir(output)
        # mkdir's mode is narrowed by the umask, never widened; chmod makes it exact.
        os.chmod(folder, FOLDER_MODE)
        # As official: the rollout server's artifact root exists from the start.
        make_folders(folder / TRIALS_DIR)
        manifest = new_manifest(name, inputs, provenance)
        write_json_atomic(manifest_path, manifest)
        return cls(folder, name, manifest, resumed=False, archived=archived)

    def discard(self) -> None:
        """Remove this folder, which this invocation created (never a resumed one), and put
        back the folder `--fresh` archived to make room for it: bad input found once the run
        began leaves the results root as it was, with no run for `runs` to list."""
        if self.resumed:
            raise RunFolderError(f"{self.path} holds an earlier run's results: it is kept")
        shutil.rmtree(self.path)
        if self.archived is not None:
            os.replace(self.archived, self.path)
        fsync_dir(self.path.parent)

    @staticmethod
    def _read_manifest(path: Path, name: str) -> dict[str, Any]:
        try:
            manifest = read_manifest(path)
        except ManifestError as exc:
            raise RunFolderError(f"{exc}; {FRESH_HINT}") from exc
        if manifest["run_name"] != name:
            # A renamed folder still resumes; the manifest keeps the name it was created with
            # (the official upload refuses it, as it refuses an archived folder).
            logger.info("run folder %s was created as %r", path.parent, manifest["run_name"])
        return manifest

    @property
    def local_run_id(self) -> str:
        return str(self.manifest["local_run_id"])

    @property
    def created_at(self) -> str:
        return str(self.manifest["created_at"])

    @property
    def inputs(self) -> dict[str, Any]:
        inputs: dict[str, Any] = self.manifest["inputs"]
        return inputs

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_FILE

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS_FILE

    @property
    def transitions_path(self) -> Path:
        return self.path / TRANSITIONS_FILE

    @property
    def index_path(self) -> Path:
        return self.path / INDEX_FILE

    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY_FILE

    @property
    def progress_path(self) -> Path:
        return self.path / PROGRESS_FILE

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def logs_path(self) -> Path:
        return self.path / LOGS_FILE

    @property
    def calls_path(self) -> Path:
        return self.path / CALLS_FILE

    @property
    def trials_dir(self) -> Path:
        """`_OSMOSIS_ROLLOUT_ARTIFACT_ROOT` for a launched rollout server (EVAL.md §5)."""
        return self.path / TRIALS_DIR

    @property
    def trajectories_dir(self) -> Path:
        return self.path / TRAJECTORIES_DIR

    @property
    def artifacts_dir(self) -> Path:
        return self.path / ARTIFACTS_DIR

    @property
    def previews_dir(self) -> Path:
        """`_OSMOSIS_ROLLOUT_PREVIEW_ROOT` for the run's servers: `<rollout_id>/preview.json`
        each (PROTOCOL.md §8.2)."""
        return self.path / PREVIEWS_DIR


__all__ = [
    "ARTIFACTS_DIR",
    "CALLS_FILE",
    "EVENTS_FILE",
    "FRESH_HINT",
    "INDEX_FILE",
    "LOCKS_DIR",
    "LOGS_FILE",
    "MANIFEST_FILE",
    "METRICS_FILE",
    "PREVIEWS_DIR",
    "PROGRESS_FILE",
    "SUMMARY_FILE",
    "TRAJECTORIES_DIR",
    "TRANSITIONS_FILE",
    "TRIALS_DIR",
    "ResumeRefused",
    "RunFolder",
    "RunFolderError",
    "archive_name",
    "default_run_name",
    "validate_run_name",
]
