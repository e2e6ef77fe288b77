"""The snapshot files of a run folder, rewritten together from the results (EVAL.md §8).

`index.jsonl`, `summary.jsonl`, `progress.json` and `metrics.json`, plus the projections
under `trajectories/` and `artifacts/`, are all rebuilt from the journal's latest results and
the `rollout_trials/` tree; none of them decides what a resume runs. They are written, as by
the official tool:

- when the run starts (every projection re-checked: a resumed run may come from the other
  tool, or a trajectory may have landed after a crash), `metrics.json` saying `running`;
- as items finish: the item's projection at once; the other files at most every
  `REFRESH_INTERVAL_SEC` (the official tool rewrites them after every item, which costs a
  run of thousands of items more than the items themselves), less often when a refresh takes
  more than `REFRESH_SHARE` of that (a run of a million items), and never more than one
  refresh waiting for the writer;
- at the end, whole, with the run's final state.

What items finishing cause is written by a thread of its own, in order: every file is a
durable write (an fsync or two), and on the event loop those held up every rollout, the
gateway and the dashboard's keys for several milliseconds per item. `write()` (and `flush()`)
waits for that thread to be done first, so the start and the end of a run are written as
before. Nothing here is the resume authority (the journal is, written before any of this), so
what a crash cuts short is written again by the next run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from core.eval.results.durable import write_bytes_atomic, write_json_atomic
from core.eval.results.folder import RunFolder
from core.eval.results.index import index_line, index_row, index_tokens
from core.eval.results.metrics import (
    RunIdentity,
    RunState,
    SummaryFields,
    metrics_document,
    summarize_fields,
)
from core.eval.results.progress import progress_document
from core.eval.results.projections import project_item
from core.eval.results.records import ItemKey, ItemResult
from core.eval.results.trials import Trajectory, TrialsView

logger = logging.getLogger(__name__)

REFRESH_INTERVAL_SEC = 2.0
#: The most of a run's time its refreshes take: the next one waits at least the last one's
#: duration over this share. A run of a million items writes some 200 MB of index per
#: refresh, which takes longer than `REFRESH_INTERVAL_SEC`: its writer thread would otherwise
#: never stop, competing with the event loop for the interpreter.
REFRESH_SHARE = 0.1


#: How long after an item's result a refresh still looks for its trajectory (a server that
#: writes it after publishing the result, a slow shared disk). Past that only the run's start
#: and end look again: a run whose servers write no trajectory here (they run elsewhere)
#: would otherwise stat and render every item again at every refresh, which at 100,000 items
#: took more than the refresh interval.
TRAJECTORY_WAIT_SEC = 30.0


@dataclass(frozen=True, slots=True)
class _IndexEntry:
    """An item's index line as a refresh made it, from `result` (kept to tell when it changed)
    and its `trajectory`'s verdict; `since`: when the first entry of this result was made (the
    snapshots' clock). The line is kept, not the row's dict: a run keeps one per item."""

    result: ItemResult
    resumed: bool
    trajectory: Trajectory | None
    line: bytes
    since: float

    def still(self, result: ItemResult, resumed: bool, now: float) -> bool:
        """The row of `result` as it is now, without looking at its trajectory again: the
        same result (the loop makes a new one for each finish), and a trajectory found or no
        longer waited for."""
        return (
            self.result is result
            and self.resumed == resumed
            and (self.trajectory is not None or now - self.since >= TRAJECTORY_WAIT_SEC)
        )

    def row(self) -> dict[str, Any]:
        return index_row(self.result, trajectory=self.trajectory, resumed=self.resumed)

    def summary_fields(self) -> SummaryFields:
        result = self.result
        tokens = index_tokens(result, self.trajectory)
        return result.row_index, result.run_index, result.status, result.reward, tokens


class Snapshots:
    """Writes the snapshot files of one run folder (see the module docstring)."""

    def __init__(
        self,
        folder: RunFolder,
        identity: RunIdentity,
        *,
        pass_threshold: float,
        sampled_rows: int,
        n: int,
        total_dataset_rows: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.folder = folder
        self.identity = identity
        self.pass_threshold = pass_threshold
        self.progress = progress_document(
            sampled_rows=sampled_rows, n=n, total_dataset_rows=total_dataset_rows
        )
        self.trials = TrialsView(folder.trials_dir)
        self._clock = clock
        self._written_at: float | None = None
        self._failed = False
        # Made with the first finished item, shut down by the next `write` (or `flush`).
        self._writer: ThreadPoolExecutor | None = None
        # The index as the last write made it, by item: a refresh renders again only the rows
        # that changed, not every row of a run of thousands every few seconds. Used by one
        # writer at a time (the loop's writes wait for the thread's).
        self._index: dict[ItemKey, _IndexEntry] = {}
        self._refresh_queued = False
        self._refresh_sec = 0.0  # how long the last refresh took (on the snapshots' clock)

    def index_rows(
        self, results: Mapping[ItemKey, ItemResult], resumed: Collection[ItemKey]
    ) -> list[dict[str, Any]]:
        """The index rows of `results`, every trajectory looked at (a summary when the files
        could not be written)."""
        return [entry.row() for entry in self._indexed(results, resumed, recheck=True)]

    def write(
        self,
        results: Mapping[ItemKey, ItemResult],
        resumed: Collection[ItemKey],
        *,
        state: RunState = "running",
        duration_ms: float = 0.0,
        completed_at: str | None = None,
        project: Iterable[ItemKey] | None = None,
    ) -> dict[str, Any]:
        """Rewrite every snapshot; project the items of `project` (None: all). Returns the
        summary written to `metrics.json`. `OSError` when a file cannot be written.

        What finished items queued is written first (`flush`)."""
        self.flush()
        self._written_at = self._clock()
        return self._write(
            results,
            resumed,
            state=state,
            duration_ms=duration_ms,
            completed_at=completed_at,
            project=project,
            # Every trajectory looked at again when the run starts and ends (a resumed run may
            # come from the other tool; a trajectory may land after its item's result).
            recheck=True,
        )

    def flush(self) -> None:
        """Wait until what finished items queued is written."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.shutdown(wait=True)

    def _write(
        self,
        results: Mapping[ItemKey, ItemResult],
        resumed: Collection[ItemKey],
        *,
        state: RunState,
        duration_ms: float,
        completed_at: str | None,
        project: Iterable[ItemKey] | None,
        recheck: bool,
    ) -> dict[str, Any]:
        for key in sorted(results) if project is None else project:
            self._project(results[key])
        entries = self._indexed(results, resumed, recheck=recheck)
        data = b"".join(entry.line for entry in entries)
        write_bytes_atomic(self.folder.index_path, data)
        write_bytes_atomic(self.folder.summary_path, data)  # the same bytes, as official
        write_json_atomic(self.folder.progress_path, self.progress)
        summary = summarize_fields(
            (entry.summary_fields() for entry in entries), pass_threshold=self.pass_threshold
        )
        document = metrics_document(
            summary, self.identity, state=state, duration_ms=duration_ms, completed_at=completed_at
        )
        write_json_atomic(self.folder.metrics_path, document)
        return summary

    def _indexed(
        self, results: Mapping[ItemKey, ItemResult], resumed: Collection[ItemKey], *, recheck: bool
    ) -> list[_IndexEntry]:
        """The index entries of `results`, in the index's order (`ItemKey` is `(row_index,
        run_index)`); an earlier entry is kept while it is `still` right, unless `recheck`."""
        previous, entries = self._index, {}
        now = self._clock()
        for key in sorted(results):
            result, was_resumed = results[key], key in resumed
            entry = previous.get(key)
            if recheck or entry is None or not entry.still(result, was_resumed, now):
                trajectory = self.trials.trajectory(result.rollout_id)
                row = index_row(result, trajectory=trajectory, resumed=was_resumed)
                since = now if entry is None or entry.result is not result else entry.since
                entry = _IndexEntry(result, was_resumed, trajectory, index_line(row), since)
            entries[key] = entry
        self._index = entries
        return list(entries.values())

    def item_finished(
        self,
        result: ItemResult,
        results: Mapping[ItemKey, ItemResult],
        resumed: Collection[ItemKey],
    ) -> None:
        """`result` was journaled: queue its projection, and a refresh of the rest when it is
        time (the results as they are now), for the writer thread.

        Never raises: the result is safe in the journal, and the end of the run writes the
        snapshots again (a failure then is reported).
        """
        now = self._clock()
        refresh = None
        interval = max(REFRESH_INTERVAL_SEC, self._refresh_sec / REFRESH_SHARE)
        due = self._written_at is None or now - self._written_at >= interval
        # One refresh waits at most: each holds a copy of every result, and a refresh of a big
        # run that takes longer than the interval would otherwise queue copies without end.
        if due and not self._refresh_queued:
            self._written_at = now
            self._refresh_queued = True
            refresh = (dict(results), frozenset(resumed))  # the loop goes on changing them
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshots")
        self._writer.submit(self._item_finished, result, refresh)

    def _item_finished(
        self,
        result: ItemResult,
        refresh: tuple[dict[ItemKey, ItemResult], frozenset[ItemKey]] | None,
    ) -> None:
        if refresh is not None:
            self._refresh_queued = False  # from here on, a newer one may be queued
        try:
            self._project(result)
            if refresh is not None:
                results, resumed = refresh
                began = self._clock()
                self._write(
                    results,
                    resumed,
                    state="running",
                    duration_ms=0.0,
                    completed_at=None,
                    project=(),
                    recheck=False,  # while it runs, only the trajectories not found yet
                )
                self._refresh_sec = self._clock() - began
        except OSError as exc:
            if not self._failed:
                self._failed = True
                logger.warning(
                    "cannot refresh the results snapshots in %s: %s", self.folder.path, exc
                )
        except Exception:  # a fault of ours: on this thread nobody else would hear of it
            logger.exception("writing the results snapshots in %s failed", self.folder.path)

    def _project(self, result: ItemResult) -> None:
        project_item(
            result,
            self.trials,
            trajectories_dir=self.folder.trajectories_dir,
            artifacts_dir=self.folder.artifacts_dir,
        )


__all__ = ["REFRESH_INTERVAL_SEC", "REFRESH_SHARE", "TRAJECTORY_WAIT_SEC", "Snapshots"]
