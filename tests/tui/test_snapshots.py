"""Snapshot tests: the dashboard drawn from the deterministic states in `states.py`.

Plain (not async) functions, as pytest-textual-snapshot runs the app itself; fixed terminal
sizes, a frozen clock, a fixed theme, no animations, and no NO_COLOR/TEXTUAL_THEME from the
environment. The same states make the README screenshots (`make screenshots`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.tui.states import SHOTS, Shot, build_app, prepare_view


@pytest.mark.parametrize("shot", SHOTS, ids=[shot.name for shot in SHOTS])
def test_snapshot(shot: Shot, snap_compare: Callable[..., bool], clean_terminal: None) -> None:
    assert snap_compare(
        build_app(shot.source(), theme=shot.theme),
        press=shot.press,
        terminal_size=shot.size,
        run_before=prepare_view(cursor_row=shot.cursor_row),
    )
