"""Snapshot tests of issue 26's views: the waterfall tab of the full view (`d`, 5) and the
details pane's waterfall, and the distributions (`h`), on fixed states, at 160×45, 80×24 and
in a light theme.

Plain functions, as pytest-textual-snapshot runs the app itself; the states are in
`timing_states.py` (the waterfall's) and `states.py` (the running board the distributions
are drawn over; its `SHOTS` hold the two pictures the README shows, the latency histogram
with a bin under the cursor among them).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tui.states import THEME, build_app, prepare_view, running_source
from tests.tui.timing_states import UNSEEN, WAITED, waterfall_source

LIGHT = "textual-light"
SIZES = [((160, 45), THEME), ((80, 24), THEME), ((100, 30), LIGHT)]
SIZE_IDS = ["160x45", "80x24", "light"]


@pytest.mark.parametrize(("size", "theme"), SIZES, ids=SIZE_IDS)
def test_the_waterfall_of_a_rollout_with_calls_server_events_and_diagnostics(
    size: tuple[int, int],
    theme: str,
    tmp_path: Path,
    snap_compare: Callable[..., bool],
    clean_terminal: None,
) -> None:
    assert snap_compare(
        build_app(waterfall_source(tmp_path), theme=theme),
        press=("d", "5"),
        terminal_size=size,
        run_before=prepare_view(cursor_row=WAITED),
    )


@pytest.mark.parametrize(("size", "theme"), SIZES[:2], ids=SIZE_IDS[:2])
def test_the_waterfall_of_a_rollout_whose_grading_was_not_observed(
    size: tuple[int, int], theme: str, snap_compare: Callable[..., bool], clean_terminal: None
) -> None:
    assert snap_compare(
        build_app(waterfall_source(), theme=theme),
        press=("d", "5"),
        terminal_size=size,
        run_before=prepare_view(cursor_row=UNSEEN),
    )


def test_the_details_pane_draws_the_waterfall_at_its_width(
    snap_compare: Callable[..., bool], clean_terminal: None
) -> None:
    assert snap_compare(
        build_app(waterfall_source()),
        press=("enter",),
        terminal_size=(160, 45),
        run_before=prepare_view(cursor_row=UNSEEN),
    )


@pytest.mark.parametrize(("size", "theme"), SIZES, ids=SIZE_IDS)
def test_the_distributions_of_the_rows_shown(
    size: tuple[int, int], theme: str, snap_compare: Callable[..., bool], clean_terminal: None
) -> None:
    assert snap_compare(
        build_app(running_source(), theme=theme),
        press=("h",),
        terminal_size=size,
        run_before=prepare_view(),
    )


def test_the_table_filtered_to_a_bins_rollouts(
    snap_compare: Callable[..., bool], clean_terminal: None
) -> None:
    assert snap_compare(
        build_app(running_source()),
        press=("h", "right", "right", "right", "right", "down", "enter"),
        terminal_size=(100, 30),
        run_before=prepare_view(),
    )
