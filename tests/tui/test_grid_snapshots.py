"""Snapshot tests of the rows × attempts grid (`a`): a run of four attempts per row with every
kind of attempt and every class of row (grid_states.py), at the dashboard's largest and
smallest sizes, and what it says for a run of one attempt per row.

Plain functions, as pytest-textual-snapshot runs the app itself; the app's clock is frozen and
its theme fixed (states.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.tui.grid_states import grid_source
from tests.tui.states import build_app, running_source


@pytest.mark.parametrize("size", [(160, 45), (80, 24)], ids=["160x45", "80x24"])
def test_grid_snapshot(
    size: tuple[int, int], snap_compare: Callable[..., bool], clean_terminal: None
) -> None:
    assert snap_compare(build_app(grid_source()), press=("a",), terminal_size=size)


def test_grid_snapshot_one_attempt_per_row(
    snap_compare: Callable[..., bool], clean_terminal: None
) -> None:
    assert snap_compare(build_app(running_source()), press=("a",), terminal_size=(80, 24))
