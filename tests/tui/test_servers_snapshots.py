"""Snapshot tests of the servers panel (`V`): three servers of a run, one accepting, one
drained, one down after a restart, with the run's rollouts spread over them (states.py), at
the dashboard's largest and smallest sizes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.tui.states import build_app, fleet_source


@pytest.mark.parametrize("size", [(160, 45), (80, 24)], ids=["160x45", "80x24"])
def test_servers_snapshot(
    size: tuple[int, int], snap_compare: Callable[..., bool], clean_terminal: None
) -> None:
    assert snap_compare(build_app(fleet_source()), press=("V",), terminal_size=size)
