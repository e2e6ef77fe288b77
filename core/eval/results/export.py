"""The dashboard's export (`e`): the rows it shows, as JSONL and CSV beside the run.

Headless on purpose: the files are a results kind like the journal (owner-only, whatever the
umask), and a test can write and read them without a terminal.
"""

from __future__ import annotations

import csv
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

# A type only: the results modules load no HTTP stack, and a record's module loads httpx.
if TYPE_CHECKING:
    from core.rollout_record import RolloutRecord

FILE_PREFIX = "osmosis-tui-export-"
EXPORT_FIELDS = (
    "rollout_id",
    "source_row_index",
    "row_index",
    "run_index",
    "status",
    "reward",
    "err_category",
    "err_message",
    "observed",
    "skipped",
    "server",
    "tokens",
    "model_calls",
)


def export_row(record: RolloutRecord, t0: float) -> dict[str, object]:
    """One rollout as the export writes it; times are seconds after `t0` (the run's start)."""
    result = record.result_head
    skipped = record.skipped_phases()
    return {
        "rollout_id": record.rollout_id,
        "source_row_index": record.source_row_index,
        "row_index": record.row_index,
        "run_index": record.run_index,
        "status": record.display_status,
        "reward": result.reward if result else None,
        "err_category": result.err_category.value if result and result.err_category else None,
        "err_message": (result.err_message if result else None) or record.admission_error,
        # Each phase as its best source timed it; `(server)` marks the server's own time,
        # `(model)` a running proved by the first model call. A phase not recorded has no
        # time (its mark is only where the replay put it).
        "observed": " ".join(
            f"{m.status.value}@{m.at - t0:.3f}" + ("" if m.source == "poll" else f"({m.source})")
            for m in record.timeline()
            if m.status not in skipped
        ),
        "skipped": " ".join(f"{k.value}:{v}" for k, v in skipped.items()),
        "server": record.server,
        "tokens": record.model.tokens,
        "model_calls": record.model.calls,
    }


def write_export(folder: Path, records: Iterable[RolloutRecord], t0: float) -> tuple[Path, int]:
    """Write `records` to a new `FILE_PREFIX<stamp>.jsonl` and `.csv` pair in `folder`.

    Returns the pair's path without its suffix and the number of rows. Raises `OSError`.
    """
    base = folder / f"{FILE_PREFIX}{time.strftime('%Y%m%d-%H%M%S')}"
    rows = [export_row(record, t0) for record in records]
    with _private(base.with_suffix(".jsonl")) as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    with _private(base.with_suffix(".csv")) as handle:
        writer = csv.DictWriter(handle, fieldnames=list(EXPORT_FIELDS))
        writer.writeheader()
        writer.writerows(rows)
    return base, len(rows)


def _private(path: Path) -> TextIO:
    """A new text file only its owner can read, like every results file (whatever the umask;
    a file of the same name from an export in the same second is narrowed too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "w", newline="")
