"""The run folder of an eval run and its manifest (EVAL.md §6).

`<output>/<run-name>/` (mode 0700) holds, each file written by its own module:

- `manifest.json` (here): `{schema_version: 1, run_name, created_at, inputs}`, written once.
  `inputs` is what a resume must not change (`model_path`, `dataset {sha256,
  selected_source_rows}`, `n`, `rollout`, `timeouts`); see `manifest_inputs`. `RunFolder.open`
  compares it on resume.
- `events.jsonl` (`core.eval.results.events`): the journal, the only authority for resume.
- `transitions.jsonl` (`core.eval.results.transitions`): diagnostic, read by `osmosis-tui
  replay`.
- `index.jsonl` (`core.eval.results.index`): one row per work item, rewritten at the end.
- `metrics.json` (`core.eval.results.metrics`): the summary, rewritten at the end.
- `logs.txt` (`core.eval.results.logs`): timestamped lines, secrets redacted.
- `calls.jsonl` (`core.eval.model_calls`): diagnostic, one line per model call through the
  gateway.
- `rollout_trials/`: the artifact root of a launched rollout server.

Every file is created with mode 0600 (see `core.eval.results.durable`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from core.eval.errors import EvalError
from core.eval.results.durable import FOLDER_MODE, describe_os_error, fsync_dir, write_json_atomic
from core.eval.results.records import iso_utc

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
MANIFEST_FILE = "manifest.json"
EVENTS_FILE = "events.jsonl"
TRANSITIONS_FILE = "transitions.jsonl"
INDEX_FILE = "index.jsonl"
METRICS_FILE = "metrics.json"
LOGS_FILE = "logs.txt"
CALLS_FILE = "calls.jsonl"
TRIALS_DIR = "rollout_trials"

RUN_NAME_MAX_LENGTH = 128
RESUME_HINT = "use --fresh to start over, or --name for a new run"


# -- errors -----------------------------------------------------------------------------------


class RunFolderError(EvalError):
    """The run folder cannot be used as asked: bad input, exit status 2 (EVAL.md §1)."""


class ResumeRefused(RunFolderError):
    """A resume would change inputs the run was started with.

    `changed_keys` are dotted paths into the manifest's `inputs`, e.g. `dataset.sha256`.
    """

    def __init__(self, run_name: str, folder: Path, changed_keys: list[str]) -> None:
        self.run_name = run_name
        self.folder = folder
        self.changed_keys = changed_keys
        super().__init__(
            f"run {run_name!r} ({folder}) was started with different inputs; changed: "
            f"{', '.join(changed_keys)}; {RESUME_HINT}"
        )


# -- run names and the run folder -------------------------------------------------------------

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _timestamp(moment: datetime | None = None) -> str:
    # Local time: the name is read by the person who started the run.
    return (moment or datetime.now()).strftime("%Y%m%d-%H%M%S")


def default_run_name(config_or_dataset_stem: str, *, now: datetime | None = None) -> str:
    """`<stem>-YYYYmmdd-HHMMSS` (local time); the stem is reduced to `[A-Za-z0-9._-]`."""
    stem = _NAME_UNSAFE.sub("-", config_or_dataset_stem).strip(".-") or "eval"
    stem = stem[: RUN_NAME_MAX_LENGTH - 16]
    return f"{stem}-{_timestamp(now)}"


def validate_run_name(name: str) -> str:
    """`name` if it is one safe, visible path segment; else `RunFolderError`."""
    if not name:
        raise RunFolderError("run name must not be empty")
    if len(name) > RUN_NAME_MAX_LENGTH:
        raise RunFolderError(f"run name must be at most {RUN_NAME_MAX_LENGTH} characters")
    if name in (".", "..") or any(c in name for c in "/\\\x00") or Path(name).name != name:
        raise RunFolderError(f"run name {name!r} must be a single path segment")
    if name[0] in ".-":
        # A leading dot hides the folder; a leading dash reads as an option in shells.
        raise RunFolderError(f"run name {name!r} must not start with '.' or '-'")
    if not name.isprintable():
        raise RunFolderError(f"run name {name!r} must not contain control characters")
    return name


def manifest_inputs(
    *,
    model_path: str,
    dataset_sha256: str,
    selected_source_rows: Iterable[int],
    n: int,
    rollout: str,
    agent_timeout_s: float | None,
    grader_timeout_s: float | None,
) -> dict[str, Any]:
    """The manifest's `inputs` in their one canonical shape."""
    return {
        "model_path": model_path,
        "dataset": {"sha256": dataset_sha256, "selected_source_rows": list(selected_source_rows)},
        "n": n,
        "rollout": rollout,
        "timeouts": {"agent_s": agent_timeout_s, "grader_s": grader_timeout_s},
    }


def work_item_count(inputs: Mapping[str, Any]) -> int | None:
    """How many work items a manifest's `inputs` make (selected rows × n); None when they do
    not say (a manifest of another shape)."""
    dataset, n = inputs.get("dataset"), inputs.get("n")
    rows = dataset.get("selected_source_rows") if isinstance(dataset, dict) else None
    if not isinstance(rows, list) or isinstance(n, bool) or not isinstance(n, int):
        return None
    return len(rows) * n


def _changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths where `old` and `new` differ; lists and scalars compare whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        changed: list[str] = []
        for key in sorted(set(old) | set(new)):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old or key not in new:
                changed.append(path)
            else:
                changed.extend(_changed_keys(old[key], new[key], path))
        return changed
    return [] if _same_value(old, new) else [prefix or "inputs"]


def _same_value(old: Any, new: Any) -> bool:
    # 450 and 450.0 are the same timeout; `true` and `1` are not the same input.
    numbers = (int, float)
    if isinstance(old, numbers) and isinstance(new, numbers) and bool not in (type(old), type(new)):
        return old == new
    return type(old) is type(new) and bool(old == new)


def _unique_aside(folder: Path) -> Path:
    base = f"{folder.name}.old-{_timestamp()}"
    candidate = folder.with_name(base)
    suffix = 2
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
    moved_aside: Path | None = None

    @classmethod
    def open(cls, output: Path, name: str, inputs: Mapping[str, Any], *, fresh: bool) -> RunFolder:
        """Create the run folder, or reopen it for resume.

        Resume requires the stored `inputs` to equal `inputs` (`ResumeRefused` names the
        changed keys). `fresh=True` renames an existing folder to `<name>.old-<timestamp>`
        (never deletes it) and starts clean. A folder that exists without a manifest is
        adopted only when empty (a crash right after mkdir); otherwise it is not ours.
        """
        validate_run_name(name)
        try:
            normalized: dict[str, Any] = json.loads(json.dumps(dict(inputs), allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"run inputs must be JSON data: {exc}") from exc
        try:
            return cls._open(output, name, normalized, fresh=fresh)
        except OSError as exc:
            # A read-only or full disk, or a folder we may not write: said plainly, before
            # any rollout runs.
            raise RunFolderError(
                f"cannot write the results under {output}: {describe_os_error(exc)}"
            ) from exc

    @classmethod
    def _open(
        cls, output: Path, name: str, normalized: dict[str, Any], *, fresh: bool
    ) -> RunFolder:
        output.mkdir(parents=True, exist_ok=True)
        folder = output / name
        moved_aside: Path | None = None
        if fresh and (folder.exists() or folder.is_symlink()):
            moved_aside = _unique_aside(folder)
            os.replace(folder, moved_aside)
            fsync_dir(output)
        # A symlink to a folder is followed (a run moved to another disk); anything else that
        # holds the name, a dangling link included, is not a run folder.
        dangling = folder.is_symlink() and not folder.exists()
        if dangling or (folder.exists() and not folder.is_dir()):
            raise RunFolderError(f"{folder} exists and is not a run folder; {RESUME_HINT}")
        manifest_path = folder / MANIFEST_FILE
        if folder.is_dir():
            if manifest_path.exists():
                manifest = cls._read_manifest(manifest_path, name)
                changed = _changed_keys(manifest["inputs"], normalized)
                if changed:
                    raise ResumeRefused(name, folder, changed)
                return cls(folder, name, manifest, resumed=True)
            if any(folder.iterdir()):
                raise RunFolderError(
                    f"{folder} exists but has no {MANIFEST_FILE}, so it is not an eval run "
                    f"folder; {RESUME_HINT}"
                )
        else:
            folder.mkdir(mode=FOLDER_MODE)
            fsync_dir(output)
        # mkdir's mode is narrowed by the umask, never widened; chmod makes it exact.
        os.chmod(folder, FOLDER_MODE)
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "run_name": name,
            "created_at": iso_utc(),
            "inputs": normalized,
        }
        write_json_atomic(manifest_path, manifest)
        return cls(folder, name, manifest, resumed=False, moved_aside=moved_aside)

    @staticmethod
    def _read_manifest(path: Path, name: str) -> dict[str, Any]:
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise RunFolderError(f"{path} cannot be read ({exc}); {RESUME_HINT}") from exc
        if not isinstance(manifest, dict) or not isinstance(manifest.get("inputs"), dict):
            raise RunFolderError(f"{path} is not an eval run manifest; {RESUME_HINT}")
        version = manifest.get("schema_version")
        if version != SCHEMA_VERSION:
            raise RunFolderError(
                f"{path} has schema_version {version!r}, this osmosis-tui reads "
                f"{SCHEMA_VERSION}; {RESUME_HINT}"
            )
        if manifest.get("run_name") != name:
            # A renamed folder still resumes; the manifest keeps the name it was created with.
            logger.info("run folder %s was created as %r", path.parent, manifest.get("run_name"))
        return manifest

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


__all__ = [
    "CALLS_FILE",
    "EVENTS_FILE",
    "INDEX_FILE",
    "LOGS_FILE",
    "MANIFEST_FILE",
    "METRICS_FILE",
    "RESUME_HINT",
    "SCHEMA_VERSION",
    "TRANSITIONS_FILE",
    "TRIALS_DIR",
    "ResumeRefused",
    "RunFolder",
    "RunFolderError",
    "default_run_name",
    "manifest_inputs",
    "validate_run_name",
    "work_item_count",
]
