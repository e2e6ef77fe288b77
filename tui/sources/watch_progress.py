"""A watch's progress, live or replayed: the rollouts that ended of those seen.

Its own module, so that a replay of a watch's recording counts as the watch did without
loading the watch's listener and its servers' clients.
"""

from __future__ import annotations

from core.board import RolloutBoard
from core.eval.results.metrics import Progress


def rollouts_ended(board: RolloutBoard) -> Progress:
    """The rollouts that ended of those on `board`. Nobody watching knows how many more will
    come (so no ETA), nor their results (so no pass rate or reward)."""
    return Progress(
        done=sum(1 for record in board if record.finished),
        total=len(board),
        passed=0,
        completed=0,
        mean_reward=None,
        rewards_count=0,
    )


__all__ = ["rollouts_ended"]
