"""`trajectories/` and `artifacts/` (EVAL.md §8): copies of the latest attempt, as official."""

from __future__ import annotations

import json
from pathlib import Path

from core.eval.results.projections import project_item, projection_stem
from core.eval.results.trials import TrialsView
from tests.eval.results.helpers import atif, file_mode, item_result


def _attempt(trials: Path, rollout_id: str, *, trajectory: bool, files: dict[str, str]) -> None:
    folder = trials / rollout_id
    (folder / "artifacts").mkdir(parents=True)
    (folder / ".osmosis-health-check").write_text("osmosis-health-check")
    if trajectory:
        (folder / "trajectory.json").write_text(json.dumps(atif(rollout_id), indent=2))
    for relative, text in files.items():
        path = folder / "artifacts" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_latest_attempt_is_projected_and_a_superseded_one_removed(tmp_path: Path) -> None:
    trials = tmp_path / "rollout_trials"
    view = TrialsView(trials)
    where = {"trajectories_dir": tmp_path / "trajectories", "artifacts_dir": tmp_path / "artifacts"}
    assert projection_stem(3, 1) == "row_3_run_1"

    _attempt(trials, "first", trajectory=True, files={"grade.json": "1", "deep/a.txt": "a"})
    project_item(item_result(3, 1, rollout_id="first"), view, **where)
    trajectory = tmp_path / "trajectories" / "row_3_run_1.json"
    assert trajectory.read_bytes() == (trials / "first" / "trajectory.json").read_bytes()
    assert file_mode(trajectory) == 0o600
    copied = tmp_path / "artifacts" / "row_3_run_1"
    assert sorted(str(p.relative_to(copied)) for p in copied.rglob("*") if p.is_file()) == [
        "deep/a.txt",
        "grade.json",
    ]
    assert file_mode(copied / "grade.json") == 0o600

    # A retry whose attempt left no trajectory and other artifacts: nothing of the first stays.
    _attempt(trials, "retry", trajectory=False, files={"grade.json": "2"})
    project_item(item_result(3, 1, rollout_id="retry", status="failed"), view, **where)
    assert not trajectory.exists()
    assert [p.name for p in copied.rglob("*")] == ["grade.json"]
    assert (copied / "grade.json").read_text() == "2"

    # An attempt with no artifacts at all has no artifacts folder.
    _attempt(trials, "bare", trajectory=False, files={})
    project_item(item_result(3, 1, rollout_id="bare", status="failed"), view, **where)
    assert not copied.exists()


def test_nothing_is_created_for_an_attempt_that_left_nothing(tmp_path: Path) -> None:
    view = TrialsView(tmp_path / "rollout_trials")
    project_item(
        item_result(0, 0),
        view,
        trajectories_dir=tmp_path / "trajectories",
        artifacts_dir=tmp_path / "artifacts",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []
