"""The snapshot files written together (EVAL.md §8): index, summary, progress, metrics and the
projections, at the start, as items finish, and at the end."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from core.eval.results.folder import RunFolder
from core.eval.results.metrics import RunIdentity
from core.eval.results.records import ItemKey, ItemResult
from core.eval.results.snapshots import (
    REFRESH_INTERVAL_SEC,
    REFRESH_SHARE,
    TRAJECTORY_WAIT_SEC,
    Snapshots,
)
from tests.eval.results.helpers import atif, file_mode, item_result, official_inputs
from tests.eval.runs.files import read_jsonl


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.step = 0.0  # how far each reading moves it on (a slow refresh)

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _snapshots(tmp_path: Path, clock: Clock) -> tuple[RunFolder, Snapshots]:
    folder = RunFolder.open(tmp_path, "r1", official_inputs(n=2), fresh=False)
    identity = RunIdentity(
        local_run_id=folder.local_run_id,
        run_name="r1",
        dataset_name="demo",
        model_name="openai/stub-model",
        rollout_name="demo",
        started_at="2026-12-01T08:46:54.142350Z",
    )
    snapshots = Snapshots(
        folder,
        identity,
        pass_threshold=1.0,
        sampled_rows=3,
        n=2,
        total_dataset_rows=6,
        clock=clock,
    )
    return folder, snapshots


def test_snapshots_at_start_during_and_at_the_end(tmp_path: Path) -> None:
    clock = Clock()
    folder, snapshots = _snapshots(tmp_path, clock)
    carried = item_result(0, 0, rollout_id="carried")
    trajectory = folder.trials_dir / "carried" / "trajectory.json"
    trajectory.parent.mkdir()
    trajectory.write_text(json.dumps(atif("carried")))
    results: dict[ItemKey, ItemResult] = {carried.key: carried}
    resumed = {carried.key}

    snapshots.write(results, resumed)
    index = folder.index_path.read_bytes()
    assert folder.summary_path.read_bytes() == index
    assert read_jsonl(folder.index_path) == [
        {
            "row_index": 0,
            "run_index": 0,
            "rollout_id": "carried",
            "trajectory_filename": "trajectory.json",
            "status": "success",
            "reward": 1.0,
            "tokens": 42,
            "duration_ms": 1234.0,
            "resumed": True,
        }
    ]
    assert json.loads(folder.progress_path.read_text()) == {
        "total_runs": 6,
        "sampled_rows": 3,
        "total_dataset_rows": 6,
    }
    metrics = json.loads(folder.metrics_path.read_text())
    assert metrics["eval_run"]["status"] == "running"
    assert metrics["eval_run"]["id"] == folder.local_run_id
    assert (folder.trajectories_dir / "row_0_run_0.json").read_bytes() == trajectory.read_bytes()
    for path in (folder.index_path, folder.summary_path, folder.progress_path, folder.metrics_path):
        assert file_mode(path) == 0o600

    # An item finishing soon after: projected at once, the index only when it is time.
    failed = item_result(1, 0, rollout_id="new", status="failed", reward=None)
    (folder.trials_dir / "new" / "artifacts").mkdir(parents=True)
    (folder.trials_dir / "new" / "artifacts" / "grade.json").write_text("{}")
    results[failed.key] = failed
    clock.now += REFRESH_INTERVAL_SEC / 2
    snapshots.item_finished(failed, results, resumed)
    snapshots.flush()  # written by the snapshots' own thread
    assert (folder.artifacts_dir / "row_1_run_0" / "grade.json").exists()
    assert folder.index_path.read_bytes() == index
    clock.now += REFRESH_INTERVAL_SEC
    snapshots.item_finished(failed, results, resumed)
    snapshots.flush()
    assert [row["rollout_id"] for row in read_jsonl(folder.index_path)] == ["carried", "new"]
    assert folder.summary_path.read_bytes() == folder.index_path.read_bytes()

    summary = snapshots.write(
        results,
        resumed,
        state="incomplete",
        duration_ms=12.5,
        completed_at="2026-12-01T08:47:02.112497Z",
    )
    metrics = json.loads(folder.metrics_path.read_text())
    assert metrics["summary"] == summary
    assert metrics["eval_run"]["status"] == "incomplete"
    assert metrics["eval_run"]["duration_ms"] == 12.5
    assert "completed_at" not in metrics["eval_run"]
    assert summary["total_samples"] == 2 and summary["failed"] == 1


def test_a_snapshot_that_cannot_be_written_does_not_stop_the_item(tmp_path: Path) -> None:
    clock = Clock()
    folder, snapshots = _snapshots(tmp_path, clock)
    result = item_result(0, 0)
    folder.index_path.mkdir()  # a folder where the file goes: every write fails
    snapshots.item_finished(result, {result.key: result}, set())
    snapshots.flush()  # the failed write happened, and raised nothing


def _refresh(
    clock: Clock,
    snapshots: Snapshots,
    result: ItemResult,
    results: dict[ItemKey, ItemResult],
) -> list[dict[str, object]]:
    """`result` finished, late enough for a refresh: the index as the writer thread left it."""
    results[result.key] = result
    clock.now += REFRESH_INTERVAL_SEC
    snapshots.item_finished(result, results, set())
    snapshots.flush()
    return read_jsonl(snapshots.folder.index_path)


def test_a_refresh_renders_again_what_changed_and_the_end_looks_at_every_trajectory(
    tmp_path: Path,
) -> None:
    """While the run goes on, a row is made again when its item has a new result or its
    trajectory was not found yet (it may land after the result); a trajectory found stays
    found until the end's write, which looks at every one again."""
    clock = Clock()
    folder, snapshots = _snapshots(tmp_path, clock)
    results: dict[ItemKey, ItemResult] = {}
    snapshots.write(results, set())

    def trajectory_of(rollout_id: str) -> Path:
        path = folder.trials_dir / rollout_id / "trajectory.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(atif(rollout_id)))
        return path

    early = trajectory_of("early")
    rows = _refresh(clock, snapshots, item_result(0, 0, rollout_id="early"), results)
    assert rows[0]["trajectory_filename"] == "trajectory.json"
    rows = _refresh(clock, snapshots, item_result(1, 0, rollout_id="late"), results)
    assert [row.get("trajectory_filename") for row in rows] == ["trajectory.json", None]

    trajectory_of("late")  # lands after its result was indexed
    early.unlink()  # a found one is not looked at again while the run goes on
    rerun = item_result(0, 1, rollout_id="rerun", status="failed", reward=None)
    rows = _refresh(clock, snapshots, rerun, results)
    assert [(row["rollout_id"], row.get("trajectory_filename")) for row in rows] == [
        ("early", "trajectory.json"),
        ("rerun", None),
        ("late", "trajectory.json"),
    ]
    replaced = item_result(1, 0, rollout_id="late-again", reward=0.5)
    rows = _refresh(clock, snapshots, replaced, results)
    assert [(row["rollout_id"], row.get("reward")) for row in rows][2] == ("late-again", 0.5)

    snapshots.write(results, set(), state="finished")
    ended = read_jsonl(folder.index_path)
    assert [(row["rollout_id"], row.get("trajectory_filename")) for row in ended] == [
        ("early", None),
        ("rerun", None),
        ("late-again", None),
    ]
    assert folder.summary_path.read_bytes() == folder.index_path.read_bytes()


def test_a_trajectory_is_waited_for_a_while_then_only_the_end_looks_again(
    tmp_path: Path,
) -> None:
    """A run whose servers write no trajectory here would otherwise stat and render every
    item again at every refresh; past `TRAJECTORY_WAIT_SEC` only the end looks again."""
    clock = Clock()
    folder, snapshots = _snapshots(tmp_path, clock)
    results: dict[ItemKey, ItemResult] = {}
    snapshots.write(results, set())
    rows = _refresh(clock, snapshots, item_result(0, 0, rollout_id="slow"), results)
    assert rows[0].get("trajectory_filename") is None
    clock.now += TRAJECTORY_WAIT_SEC
    path = folder.trials_dir / "slow" / "trajectory.json"
    path.parent.mkdir()
    path.write_text(json.dumps(atif("slow")))
    rows = _refresh(clock, snapshots, item_result(1, 0, rollout_id="other"), results)
    assert [row.get("trajectory_filename") for row in rows] == [None, None]
    snapshots.write(results, set(), state="finished")
    ended = read_jsonl(folder.index_path)
    assert [row.get("trajectory_filename") for row in ended] == ["trajectory.json", None]


def test_a_refresh_waits_for_the_one_before_it_rather_than_queueing_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each refresh holds a copy of every result: while one is being written and another
    waits, items that finish queue their projections only."""
    clock = Clock()
    _folder, snapshots = _snapshots(tmp_path, clock)
    results: dict[ItemKey, ItemResult] = {}
    snapshots.write(results, set())
    copies: list[int] = []
    written = snapshots._write

    def counted(held: Mapping[ItemKey, ItemResult], *args: Any, **kwargs: Any) -> Any:
        copies.append(len(held))
        return written(held, *args, **kwargs)

    monkeypatch.setattr(snapshots, "_write", counted)
    gate = threading.Event()
    project = snapshots._project

    def held(result: ItemResult) -> None:
        gate.wait(5)
        project(result)

    monkeypatch.setattr(snapshots, "_project", held)
    for row in range(3):  # the writer is held on the first: the next waits, the third is not queued
        result = item_result(row, 0, rollout_id=f"r{row}")
        results[result.key] = result
        clock.now += REFRESH_INTERVAL_SEC
        snapshots.item_finished(result, results, set())
    gate.set()
    snapshots.flush()
    assert copies == [1, 2]
    result = item_result(0, 1, rollout_id="after")
    results[result.key] = result
    clock.now += REFRESH_INTERVAL_SEC
    snapshots.item_finished(result, results, set())
    snapshots.flush()
    assert copies == [1, 2, 4]


def test_a_slow_refresh_puts_the_next_one_off(tmp_path: Path) -> None:
    """A refresh takes at most `REFRESH_SHARE` of the run's time: after one that took 6 s
    (a big run's index), the next waits 60 s, not `REFRESH_INTERVAL_SEC`."""
    clock = Clock()
    folder, snapshots = _snapshots(tmp_path, clock)
    results: dict[ItemKey, ItemResult] = {}
    snapshots.write(results, set())

    def finish(row: int) -> list[int]:
        result = item_result(row, 0, rollout_id=f"r{row}")
        results[result.key] = result
        snapshots.item_finished(result, results, set())
        snapshots.flush()
        return [line["row_index"] for line in read_jsonl(folder.index_path)]

    clock.now += REFRESH_INTERVAL_SEC
    clock.step = 3.0  # each reading of the clock 3 s later: the refresh reads it twice
    assert finish(0) == [0]
    clock.step = 0.0
    slow = 6.0  # the refresh's two readings, 3 s each
    assert slow / REFRESH_SHARE > REFRESH_INTERVAL_SEC + slow
    clock.now += REFRESH_INTERVAL_SEC
    assert finish(1) == [0], "not yet: the last refresh took 6 s"
    clock.now += slow / REFRESH_SHARE
    assert finish(2) == [0, 1, 2]
