"""`inputs.rollout.source_digest` of the manifest: a SHA-256 of a rollout's source tree.

Computed exactly as the official `osmosis eval run` computes it, so that a run started by
either tool resumes under the other (EVAL.md §8): a change to the rollout's code refuses the
resume, and running the rollout (which makes `uv sync` write `.venv/`, `uv.lock` and
`*.egg-info/` into its folder) does not.

- Every file under the root counts, hidden ones too; a symlink to a file counts with its
  target's bytes. Directory symlinks are not followed: a directory or dangling symlink makes
  the digest refuse (`ValueError`), since it could not say what such a link holds.
- A path is left out when any of its components (the file's own name included) is one of
  `EXCLUDED_NAMES` or matches one of `EXCLUDED_PATTERNS`, and when it lies under `exclude`
  (a run output folder inside the rollout folder must not change the digest of its rollout).
- The digest is taken over, for each file in order of its path's components (compared one by
  one, so `a/x` comes before `a-b/x`), the `/`-joined relative path in UTF-8 immediately
  followed by the file's bytes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

EXCLUDED_NAMES = frozenset(
    {
        "__pycache__",
        ".git",
        ".venv",
        "venv",
        "dist",
        "build",
        "node_modules",
        ".pytest_cache",
        ".ruff_cache",
    }
)
EXCLUDED_PATTERNS = ("uv.lock", "*.egg-info")

# The digest of a folder without files: what an external server's lock holds, whose code is
# not here to read.
EMPTY_SOURCE_DIGEST = hashlib.sha256().hexdigest()


def _excluded(parts: tuple[str, ...]) -> bool:
    return any(
        part in EXCLUDED_NAMES or any(fnmatchcase(part, pattern) for pattern in EXCLUDED_PATTERNS)
        for part in parts
    )


def _source_files(root: Path, exclude: Path | None) -> Iterator[tuple[tuple[str, ...], Path]]:
    """(relative path components, path) of every file that counts, in no particular order."""
    for folder, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(folder)
        kept_dirs: list[str] = []
        for name in [*dirnames, *filenames]:
            path = here / name
            parts = path.relative_to(root).parts
            if _excluded(parts) or (exclude is not None and path.is_relative_to(exclude)):
                continue  # an excluded folder is not walked: nothing below it counts
            if path.is_symlink() and not path.is_file():
                raise ValueError(
                    f"the rollout source holds a directory or dangling symlink, {path} -> "
                    f"{os.readlink(path)}; replace it with a real folder or file so the "
                    "run's source digest covers what it points to"
                )
            if name in dirnames:
                kept_dirs.append(name)
            elif path.is_file():
                yield parts, path
        dirnames[:] = kept_dirs


def rollout_source_digest(root: Path, *, exclude: Path | None = None) -> str:
    """The official source digest of the rollout folder `root` (64 lowercase hex digits).

    `exclude` is the run output root when it lies inside `root`. A folder that does not
    exist has no files: its digest is `EMPTY_SOURCE_DIGEST`.
    """
    root = root.resolve()
    if exclude is not None:
        exclude = exclude.resolve()
    digest = hashlib.sha256()
    for parts, path in sorted(_source_files(root, exclude), key=lambda entry: entry[0]):
        digest.update("/".join(parts).encode("utf-8"))
        digest.update(path.read_bytes())
    return digest.hexdigest()


__all__ = [
    "EMPTY_SOURCE_DIGEST",
    "EXCLUDED_NAMES",
    "EXCLUDED_PATTERNS",
    "rollout_source_digest",
]
