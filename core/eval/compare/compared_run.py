"""What a comparison reads of one run folder: ours or the official `osmosis eval run`'s.

From `manifest.json`: the run's name, model, dataset digest, its selected source rows and `n`
(so a work item without a result is known as pending, not missing); from `events.jsonl`: the
latest result of every work item, keyed by (source row, attempt), so that two runs over
different selections of one dataset still pair row for row; from `metrics.json`: the pass
threshold the run counted with (the official default when it says none). A journal record
without `source_row_index` (an older official writer) takes it from its `row_index`, the row's
place in the sorted selection.

A row's content is read only when asked (`prompt_digest`): the opening messages (system and
user, before the model's first answer) of an attempt's trajectory in `rollout_trials/`, which
is what tells two rows apart when two runs' datasets differ.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

from core.eval.compare.outcomes import ItemOutcome, outcome_of
from core.eval.errors import EvalError
from core.eval.results.events import Journal
from core.eval.results.folder import (
    EVENTS_FILE,
    MANIFEST_FILE,
    METRICS_FILE,
    TRANSITIONS_FILE,
    TRIALS_DIR,
)
from core.eval.results.manifest import ManifestError, read_manifest, selector_spans
from core.eval.results.metrics import DEFAULT_PASS_THRESHOLD, recorded_pass_threshold
from core.eval.results.records import ItemResult
from core.eval.results.trials import TRAJECTORY_FILE
from core.eval.untrusted_json import load_json_file, text_of
from core.transcript import read_trajectory

#: (source row, attempt): what pairs a work item of one run with the same one of another.
PairKey = tuple[int, int]
Tool = Literal["osmosis-tui", "osmosis"]


class CompareInputError(EvalError):
    """A run cannot be compared as asked (bad input: exit status 2); the message says why."""


@dataclass
class ComparedRun:
    """One run folder, as a comparison sees it (see the module docstring)."""

    folder: Path
    name: str
    tool: Tool
    model: str | None
    dataset_sha256: str | None
    #: The selected source rows, ascending.
    source_rows: tuple[int, ...]
    n: int
    threshold: float
    #: False when neither the caller nor metrics.json said the threshold (the official default
    #: is used).
    threshold_known: bool
    results: dict[PairKey, ItemResult]
    #: Lines of the journal that could not be read, and the like.
    warnings: list[str] = field(default_factory=list)
    _prompts: dict[int, str | None] = field(default_factory=dict, repr=False)

    @cached_property
    def attempts_by_row(self) -> dict[int, Sequence[int]]:
        """Every work item of the run by source row: its plan, and anything its journal holds
        beside it (a record of another plan is shown, never hidden)."""
        rows: dict[int, Sequence[int]] = dict.fromkeys(self.source_rows, range(self.n))
        for row, attempt in self.results:
            planned = rows.get(row)
            if planned is None or attempt not in planned:
                rows[row] = sorted({*(planned or ()), attempt})
        return rows

    @cached_property
    def outcomes(self) -> dict[PairKey, ItemOutcome]:
        """The outcome of every finished work item, counted with the run's threshold."""
        threshold = self.threshold
        return {key: outcome_of(result, threshold) for key, result in self.results.items()}

    @property
    def work_items(self) -> int:
        return len(self.source_rows) * self.n

    def prompt_digest(self, source_row: int) -> str | None:
        """A digest of the row's opening messages, from the first attempt with a readable
        trajectory; None when no attempt left one."""
        if source_row not in self._prompts:
            self._prompts[source_row] = self._read_prompt(source_row)
        return self._prompts[source_row]

    def _read_prompt(self, source_row: int) -> str | None:
        for attempt in range(max(self.n, 1)):
            result = self.results.get((source_row, attempt))
            if result is None:
                continue
            path = self.folder / TRIALS_DIR / result.rollout_id / TRAJECTORY_FILE
            transcript = read_trajectory(path, root=self.folder / TRIALS_DIR)
            if transcript is None:
                continue
            opening: list[tuple[str, str]] = []
            for step in transcript.steps:
                if step.role not in ("system", "user"):
                    break
                opening.append((step.role, step.text))
            if opening and not transcript.truncated:
                encoded = json.dumps(opening, ensure_ascii=False).encode()
                return hashlib.sha256(encoded).hexdigest()
        return None


def read_compared_run(folder: Path, *, label: str, threshold: float | None = None) -> ComparedRun:
    """Read the run folder `folder` (`label`, e.g. "A", names it in errors); `threshold`
    overrides the one the run recorded. `CompareInputError` when it is no readable run."""
    try:
        manifest = read_manifest(folder / MANIFEST_FILE)
    except ManifestError as exc:
        raise CompareInputError(f"{label}: {exc}") from None
    inputs = manifest["inputs"]
    dataset = inputs.get("dataset")
    selector = dataset.get("selected_source_rows") if isinstance(dataset, dict) else None
    spans = selector_spans(selector) if isinstance(selector, str) else None
    n = inputs.get("n")
    if spans is None or isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise CompareInputError(
            f"{label}: {folder / MANIFEST_FILE} does not say which rows the run selected "
            "(inputs.dataset.selected_source_rows) and how many attempts each (inputs.n)"
        )
    source_rows = tuple(sorted({row for low, high in spans for row in range(low, high + 1)}))
    warnings: list[str] = []
    try:
        journaled = Journal.load(folder / EVENTS_FILE, on_warning=warnings.append)
    except OSError as exc:
        raise CompareInputError(
            f"{label}: {folder / EVENTS_FILE} cannot be read ({exc.strerror or exc})"
        ) from None
    results = _by_source_row(journaled.values(), source_rows, folder, warnings.append)
    recorded = _recorded_threshold(folder / METRICS_FILE, warnings.append)
    model = inputs.get("model_path")
    known = threshold is not None or recorded is not None
    if threshold is None:
        threshold = DEFAULT_PASS_THRESHOLD if recorded is None else recorded
    return ComparedRun(
        folder=folder,
        name=text_of(manifest.get("run_name")) or folder.name,
        tool="osmosis-tui" if (folder / TRANSITIONS_FILE).exists() else "osmosis",
        model=model if isinstance(model, str) else None,
        dataset_sha256=text_of(dataset.get("sha256")) if isinstance(dataset, dict) else None,
        source_rows=source_rows,
        n=n,
        threshold=threshold,
        threshold_known=known,
        results=results,
        warnings=warnings,
    )


def _by_source_row(
    results: Iterable[ItemResult],
    source_rows: tuple[int, ...],
    folder: Path,
    warn: Callable[[str], None],
) -> dict[PairKey, ItemResult]:
    keyed: dict[PairKey, ItemResult] = {}
    for result in results:
        row = result.source_row_index
        if row is None:
            if result.row_index >= len(source_rows):
                warn(
                    f"{folder / EVENTS_FILE}: a result of row_index {result.row_index} names "
                    "no source row and lies outside the selection: left out"
                )
                continue
            row = source_rows[result.row_index]
        keyed[(row, result.run_index)] = result
    return keyed


def _recorded_threshold(path: Path, warn: Callable[[str], None]) -> float | None:
    try:
        return recorded_pass_threshold(load_json_file(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        warn(f"{path} cannot be read ({exc}): its pass threshold is taken as the default")
        return None


__all__ = ["CompareInputError", "ComparedRun", "PairKey", "Tool", "read_compared_run"]
