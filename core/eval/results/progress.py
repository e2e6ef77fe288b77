"""`progress.json` of an eval run (EVAL.md §8): the size of the run, as official.

`{"total_runs": <selected rows x n>, "sampled_rows": <selected rows>, "total_dataset_rows":
<records in the dataset file>}`: the planned total, not a count of what is done (the index
says that). Rewritten with the other snapshots; the official upload checks that the index
holds exactly `total_runs` lines.
"""

from __future__ import annotations

from typing import Any


def progress_document(*, sampled_rows: int, n: int, total_dataset_rows: int) -> dict[str, Any]:
    return {
        "total_runs": sampled_rows * max(1, n),
        "sampled_rows": sampled_rows,
        "total_dataset_rows": total_dataset_rows,
    }


__all__ = ["progress_document"]
