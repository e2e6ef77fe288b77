"""Run folders for the compare tests, written with the results room's own writers: a manifest
in the official shape, a journal of results, and, when asked, metrics.json's threshold and
each attempt's trajectory."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from core.eval.results.events import Journal
from core.eval.results.folder import EVENTS_FILE, MANIFEST_FILE, METRICS_FILE, TRIALS_DIR
from core.eval.results.manifest import format_row_selector, new_manifest
from core.eval.results.records import ItemResult, ItemStatus
from core.eval.results.trials import TRAJECTORY_FILE
from tests.eval.results.helpers import atif, official_inputs

SHA = "a" * 64
#: What a work item came to, as a test spells it: status, reward, error type.
Spelled = tuple[ItemStatus, float | None, str | None]
PASS: Spelled = ("success", 1.0, None)
FAIL: Spelled = ("success", 0.0, None)
SKIP: Spelled = ("skipped", None, None)


def error(kind: str = "AgentError") -> Spelled:
    return ("failed", None, kind)


def write_run(
    folder: Path,
    *,
    source_rows: list[int],
    n: int = 1,
    results: Mapping[tuple[int, int], Spelled],
    sha: str = SHA,
    threshold: float | None = 1.0,
    prompts: Mapping[int, str] | None = None,
    with_source_rows: bool = True,
) -> Path:
    """A run folder over `source_rows` x `n` with `results` keyed by (source row, attempt);
    `prompts` gives a row's opening user message, written into each of its trajectories;
    `threshold` is what metrics.json says (None: no metrics.json)."""
    folder.mkdir(parents=True)
    inputs = official_inputs(
        dataset={"sha256": sha, "selected_source_rows": format_row_selector(source_rows)}, n=n
    )
    manifest = new_manifest(folder.name, inputs, {"sdk_version": "0.3.8"})
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))
    ordered = sorted(source_rows)
    journal = Journal.open(folder / EVENTS_FILE)
    try:
        for (row, attempt), (status, reward, error_type) in sorted(results.items()):
            rollout_id = f"{folder.name}-{row}-{attempt}"
            journal.append(
                ItemResult(
                    row_index=ordered.index(row),
                    run_index=attempt,
                    rollout_id=rollout_id,
                    status=status,
                    source_row_index=row if with_source_rows else None,
                    reward=reward,
                    tokens=100 + row,
                    duration_ms=1000.0 * (attempt + 1),
                    error_type=error_type,
                )
            )
            if prompts is not None and row in prompts:
                trial = folder / TRIALS_DIR / rollout_id
                trial.mkdir(parents=True)
                document = atif(rollout_id)
                document["steps"] = [
                    {"step_id": 1, "source": "user", "message": prompts[row]},
                    {"step_id": 2, "source": "agent", "message": "an answer"},
                ]
                (trial / TRAJECTORY_FILE).write_text(json.dumps(document))
    finally:
        journal.close()
    if threshold is not None:
        (folder / METRICS_FILE).write_text(json.dumps({"summary": {"pass_threshold": threshold}}))
    return folder
