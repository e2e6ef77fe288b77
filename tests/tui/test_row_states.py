"""Rows tinted by state: finished rows by how they ended, a stuck one most of all, rollouts in
flight on the table's own background; every tint from the theme's variables."""

from __future__ import annotations

import pytest
from rich.color import Color
from textual.theme import Theme

from tests.tui.states import build_app, rollout_id
from tui.app import DashboardApp

SIZE = (160, 45)
RUNNING, SUCCESS, FAILURE, CANCELLED, STUCK, NOT_ADMITTED, QUEUED = 17, 1, 8, 11, 16, 23, 21


def row_style(app: DashboardApp, row: int) -> tuple[Color | None, bool]:
    """The background and boldness of the table line of `row`'s rollout (in its middle)."""
    table = app.table
    y = table.order.index(rollout_id(row)) - int(table.scroll_offset.y) + 1
    strip = table.render_line(y)
    segment = [s for s in strip if s.text.strip()][3]
    style = segment.style
    assert style is not None
    return style.bgcolor, bool(style.bold)


async def tints(theme: str) -> dict[int, tuple[Color | None, bool]]:
    app = build_app()
    for name, success in (("green-success", "#00ff00"), ("blue-success", "#0000ff")):
        app.register_theme(Theme(name, primary="#0178D4", success=success, dark=True))
    async with app.run_test(size=SIZE) as pilot:
        app.theme = theme
        app.table.move_cursor_to(rollout_id(QUEUED))  # the cursor's colour is not a tint
        await pilot.pause()
        rows = (RUNNING, SUCCESS, FAILURE, CANCELLED, STUCK, NOT_ADMITTED)
        return {row: row_style(app, row) for row in rows}


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light"])
async def test_rows_are_tinted_by_state_and_a_stuck_one_stands_out(theme: str) -> None:
    shown = await tints(theme)
    plain, _ = shown[RUNNING]
    backgrounds = {row: background for row, (background, _) in shown.items()}
    for row in (SUCCESS, FAILURE, CANCELLED, STUCK):
        assert backgrounds[row] != plain, f"row {row} is not tinted"
    assert len({backgrounds[row] for row in (SUCCESS, FAILURE, CANCELLED, STUCK)}) == 4
    assert backgrounds[NOT_ADMITTED] == backgrounds[FAILURE]  # it failed too
    assert shown[STUCK][1] and not shown[RUNNING][1] and not shown[FAILURE][1]  # stuck: bold


async def test_the_tints_follow_the_theme() -> None:
    dark, light = await tints("textual-dark"), await tints("textual-light")
    assert all(dark[row][0] != light[row][0] for row in (SUCCESS, FAILURE, STUCK))
    green, blue = await tints("green-success"), await tints("blue-success")
    green_bg, blue_bg = green[SUCCESS][0], blue[SUCCESS][0]
    assert green_bg is not None and blue_bg is not None
    green_rgb, blue_rgb = green_bg.get_truecolor(), blue_bg.get_truecolor()
    # The theme's own success colour, not a fixed one.
    assert green_rgb.green > blue_rgb.green and blue_rgb.blue > green_rgb.blue
    assert green[FAILURE][0] == blue[FAILURE][0]
