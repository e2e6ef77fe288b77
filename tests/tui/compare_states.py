"""Two run folders for the compare screen's tests, written with the results room's own writers
(`tests.eval.compare.folders.write_run`: a manifest, a journal), with a known set of rows
that differ and, for some work items, the trajectory the rollout server left.

Rows 0 … 7, two attempts each; what B did against A, attempt by attempt:

| row | A            | B                 | classes                          |
|-----|--------------|-------------------|----------------------------------|
| 0   | pass, pass   | pass, pass        | still_passing ×2                 |
| 1   | pass, pass   | fail, pass        | regressed, still_passing         |
| 2   | pass, fail   | pass, pass        | still_passing, improved          |
| 3   | fail, fail   | fail, fail        | still_failing ×2                 |
| 4   | error, fail  | other error, fail | error_changed, still_failing     |
| 5   | pass, pass   | fail, fail        | regressed ×2                     |
| 6   | pass, skip   | pass, skip        | still_passing, skipped           |
| 7   | pass, -      | pass, pass        | still_passing, pending           |

Rows that changed, in the order the screen lists them: 1, 5 (regressed), 2, 4, then the rest.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.eval.compare.compared_run import read_compared_run
from core.eval.compare.comparison import Comparison, compare_runs
from core.eval.results.folder import TRIALS_DIR
from core.eval.results.trials import TRAJECTORY_FILE
from tests.eval.compare.folders import FAIL, PASS, SKIP, Spelled, error, write_run
from tests.eval.results.helpers import atif

ROWS = list(range(8))
A_RESULTS: dict[tuple[int, int], Spelled] = {
    (0, 0): PASS, (0, 1): PASS,
    (1, 0): PASS, (1, 1): PASS,
    (2, 0): PASS, (2, 1): FAIL,
    (3, 0): FAIL, (3, 1): FAIL,
    (4, 0): error("AgentError"), (4, 1): FAIL,
    (5, 0): PASS, (5, 1): PASS,
    (6, 0): PASS, (6, 1): SKIP,
    (7, 0): PASS,
}  # fmt: skip
B_RESULTS: dict[tuple[int, int], Spelled] = {
    (0, 0): PASS, (0, 1): PASS,
    (1, 0): FAIL, (1, 1): PASS,
    (2, 0): PASS, (2, 1): PASS,
    (3, 0): FAIL, (3, 1): FAIL,
    (4, 0): error("TimeoutError"), (4, 1): FAIL,
    (5, 0): FAIL, (5, 1): FAIL,
    (6, 0): PASS, (6, 1): SKIP,
    (7, 0): PASS, (7, 1): PASS,
}  # fmt: skip
#: The rows that changed, as the screen orders them: regressed first.
CHANGED_ROWS = [1, 5, 2, 4]
SYSTEM = "You are a careful calculator. Reply with the number only."


def question(row: int) -> str:
    return f"What is {row + 11} * {row + 3}?"


def answer(row: int, passed: bool) -> str:
    right = (row + 11) * (row + 3)
    return str(right if passed else right + 1)


def write_trajectory(run: Path, row: int, attempt: int, spelled: Spelled) -> None:
    """The conversation of `run`'s work item, as the rollout server leaves it."""
    rollout_id = f"{run.name}-{row}-{attempt}"
    trial = run / TRIALS_DIR / rollout_id
    trial.mkdir(parents=True, exist_ok=True)
    document = atif(rollout_id)
    document["steps"] = [
        {"step_id": 1, "source": "system", "message": SYSTEM},
        {"step_id": 2, "source": "user", "message": question(row)},
        {"step_id": 3, "source": "agent", "message": answer(row, spelled == PASS)},
    ]
    (trial / TRAJECTORY_FILE).write_text(json.dumps(document))


def write_runs(root: Path) -> tuple[Path, Path]:
    """Runs `before` (A) and `after` (B) under `root`, with the trajectories of rows 1 and 5
    (every attempt of both runs but A's row 5 attempt 1, left without one)."""
    folders = []
    for name, results in (("before", A_RESULTS), ("after", B_RESULTS)):
        folder = write_run(root / name, source_rows=ROWS, n=2, results=results)
        for (row, attempt), spelled in results.items():
            if row in (1, 5) and (name, row, attempt) != ("before", 5, 1):
                write_trajectory(folder, row, attempt, spelled)
        folders.append(folder)
    return folders[0], folders[1]


def comparison_of(root: Path) -> Comparison:
    before, after = write_runs(root)
    return compare_runs(read_compared_run(before, label="A"), read_compared_run(after, label="B"))
