"""`trajectories/row_R_run_K.json` and `artifacts/row_R_run_K/` (EVAL.md §8), as official.

Copies, for each work item's latest result, of what the rollout server wrote for that attempt
(`core.eval.results.trials`): the trajectory when it is valid, and every artifact file. `R` is
the row's position in the selection (`row_index`), not its source row. A projection always
shows the latest attempt: files of a superseded attempt are removed, and an item whose attempt
left nothing has no projection. `trajectories/` and `artifacts/` exist once something was
copied into them.

Copies are written like every snapshot (atomic, mode 0600), and only when their bytes differ
from what is there: re-projecting a resumed run, whose copies mostly exist already, costs a
read per file rather than a durable write. Folders are created 0700, like the run folder.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from core.eval.results.durable import make_folders, write_bytes_atomic
from core.eval.results.records import ItemResult
from core.eval.results.trials import TrialsView, artifact_files


def projection_stem(row_index: int, run_index: int) -> str:
    return f"row_{row_index}_run_{run_index}"


def _copy(source: Path, destination: Path) -> None:
    data = source.read_bytes()
    with contextlib.suppress(OSError):
        if destination.read_bytes() == data:
            return
    make_folders(destination.parent)
    write_bytes_atomic(destination, data)


def project_item(
    result: ItemResult, trials: TrialsView, *, trajectories_dir: Path, artifacts_dir: Path
) -> None:
    """Make the item's projection that of `result`'s attempt."""
    stem = projection_stem(result.row_index, result.run_index)
    trajectory = trajectories_dir / f"{stem}.json"
    if trials.trajectory(result.rollout_id) is not None:
        _copy(trials.trajectory_path(result.rollout_id), trajectory)
    else:
        trajectory.unlink(missing_ok=True)
    source = trials.artifacts_dir(result.rollout_id)
    wanted = artifact_files(source)
    target = artifacts_dir / stem
    if target.is_dir() and not target.is_symlink():
        kept = set(wanted)
        for path in sorted(target.rglob("*"), reverse=True):  # files before their folders
            relative = path.relative_to(target)
            if path.is_dir() and not path.is_symlink():
                if not any(path.iterdir()):
                    path.rmdir()
            elif relative not in kept:
                path.unlink()
    elif target.exists() or target.is_symlink():
        target.unlink()
    for relative in wanted:
        _copy(source / relative, target / relative)
    if target.is_dir() and not any(target.iterdir()):
        shutil.rmtree(target)


__all__ = ["project_item", "projection_stem"]
