"""Snapshot tests of the compare screen and of both sides of a row, at the dashboard's two
pinned sizes (160×45 and 80×24), on the run folders of `compare_states.py`.

Plain functions, as pytest-textual-snapshot runs the app itself; a fixed theme, no
animations, no NO_COLOR/TEXTUAL_THEME from the environment. Nothing on these screens reads a
clock: a comparison is what its folders hold.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tui.compare_states import comparison_of
from tests.tui.states import THEME
from tui.compare_app import CompareApp, create_compare_app

SIZES = [(160, 45), (80, 24)]
SIZE_IDS = ["160x45", "80x24"]


def compare_app(root: Path) -> CompareApp:
    app = create_compare_app(comparison_of(root))
    app.theme = THEME
    app.animation_level = "none"
    return app


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_compare_screen_snapshot(
    size: tuple[int, int],
    tmp_path: Path,
    snap_compare: Callable[..., bool],
    clean_terminal: None,
) -> None:
    assert snap_compare(compare_app(tmp_path), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_compare_filtered_snapshot(
    size: tuple[int, int],
    tmp_path: Path,
    snap_compare: Callable[..., bool],
    clean_terminal: None,
) -> None:
    # Regressed only, the cursor on the second of them.
    assert snap_compare(compare_app(tmp_path), terminal_size=size, press=["1", "n"])


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_row_sides_snapshot(
    size: tuple[int, int],
    tmp_path: Path,
    snap_compare: Callable[..., bool],
    clean_terminal: None,
) -> None:
    # Row 5: regressed in both attempts; A's second attempt left no trajectory.
    assert snap_compare(compare_app(tmp_path), terminal_size=size, press=["n", "enter"])
