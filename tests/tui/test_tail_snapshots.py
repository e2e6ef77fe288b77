"""Snapshots of the summary strip of a run that hedges slow work items and requeues stuck
ones by rule (issue 28): `hedged 3 (2 won)` and `1 requeued stuck` beside the progress, at
160×45 and at 80×24. The board is tests/tui/states.py's running one; its dispatch says the
counts, as a live run's `RunControl.state` would. Plain functions, as pytest-textual-snapshot
runs the app itself; a frozen clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from core.eval.dispatch_gate import DispatchState
from tests.tui.states import StaticSource, build_app, prepare_view, running_board


@dataclass
class HedgingSource(StaticSource):
    """The running board, its dispatch having sent 3 hedges (2 won) and requeued 1 by rule."""

    def dispatch(self) -> DispatchState | None:
        return DispatchState(
            paused=False,
            max_in_flight=8,
            in_flight=sum(1 for record in self.board if record.in_flight),
            hedges_sent=3,
            hedges_won=2,
            requeued_by_rule=1,
        )


@pytest.mark.parametrize("size", [(160, 45), (80, 24)], ids=["large", "small"])
def test_tail_snapshot(
    size: tuple[int, int], snap_compare: Callable[..., bool], clean_terminal: None
) -> None:
    source = HedgingSource(running_board(), total=40)
    assert snap_compare(build_app(source), terminal_size=size, run_before=prepare_view())
