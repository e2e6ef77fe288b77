"""How the rollout server replaces a file it writes (a live preview, a trial's result files):
one writer, one policy.

The data goes to a unique temporary file beside the target (`mkstemp`: two writers never
share one; created 0600, readable by its owner alone), which then replaces the target in one
step (`os.replace`): a reader sees the old file or the new one, never half of either. Nothing
is fsync'd: a preview is replaced every few seconds while its rollout runs, and a trial's files
repeat what the client was already answered over HTTP, so a crash costs at most the latest
copy, where an fsync would cost every write a disk flush on the rollout's path. Where a file
goes (and whether a symlink on the way is to be trusted) is the caller's to check.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_file(path: Path, data: bytes) -> None:
    """Replace `path` with `data` (see the module docstring); `OSError` when it cannot be."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


__all__ = ["replace_file"]
