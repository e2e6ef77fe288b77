"""Deterministic states for the pictures of issue 26's views (the waterfall tab, the
distributions): fixed boards on a frozen clock, as in `states.py`, whose helpers they use.

- `WAITED`: a rollout whose server reported every phase (its ownership events), sent 0.3 s
  before its server admitted it, that waited 38.7 s on one of its three model calls, then
  was graded for 1.1 s; the server left Harbor-shaped diagnostics in its trial folder.
- `UNSEEN`: one whose grading no source saw (queued, then finished, between two polls; its
  model call proves running).
"""

from __future__ import annotations

import json
from pathlib import Path

from core.board import RolloutBoard
from tests.tui.states import (
    OK,
    T0,
    G,
    Q,
    R,
    StaticSource,
    _add,
    _call,
    _reported,
    _result,
    rollout_id,
)

WAITED, UNSEEN = 30, 31
#: What osmosis-ai 0.3.8's Harbor backend leaves in `rollout_trials/<id>/diagnostics.json`.
HARBOR_DIAGNOSTICS = {
    "backend": "harbor",
    "category": None,
    "harbor_exception_type": None,
    "phase": "verifier",
    "timings_sec": {
        "agent": 41.0,
        "agent_setup": 0.2,
        "environment_setup": 0.3,
        "total": 42.5,
        "verifier": 1.0,
    },
}


def waterfall_board() -> RolloutBoard:
    board = RolloutBoard(stuck_after_sec=60.0)
    board.started_at = T0
    waited = _add(
        board,
        WAITED,
        WAITED,
        [(Q, 10.3), (R, 10.9), (OK, 53.3)],
        result=_result(rollout_id(WAITED), OK, WAITED, reward=1.0),
    )
    waited.submitted_at = T0 + 10.0  # POST /rollout sent; admitted 0.3 s later
    _reported(board, WAITED, [(Q, 10.25), (R, 10.4), (G, 52.0), (OK, 53.1)])
    _call(board, WAITED, 10.6, 12.2, tokens=812)
    _call(board, WAITED, 12.5, 51.2, tokens=1420)
    _call(board, WAITED, 51.4, 51.9, tokens=96)
    _add(
        board,
        UNSEEN,
        UNSEEN,
        [(Q, 60.0), (OK, 63.0)],
        result=_result(rollout_id(UNSEEN), OK, UNSEEN, reward=1.0),
    )
    _call(board, UNSEEN, 60.5, 62.0)
    board.take_changes()
    return board


def waterfall_source(trials_root: Path | None = None) -> StaticSource:
    """The two rollouts; with `trials_root`, the server's diagnostics of `WAITED` in it."""
    if trials_root is not None:
        folder = trials_root / rollout_id(WAITED)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "diagnostics.json").write_text(json.dumps(HARBOR_DIAGNOSTICS, indent=2))
    return StaticSource(waterfall_board(), total=2, trials_root=trials_root)
