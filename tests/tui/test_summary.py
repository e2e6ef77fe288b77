"""The summary strip in narrow terminals: what it shows is whole, never cut mid-word."""

from __future__ import annotations

import pytest

from tests.tui.helpers import screen_lines
from tests.tui.states import StaticSource, build_app, finished_board, prepare_view

# The screen's lines: the header, then the summary's chips, progress and failures.
CHIPS, PROGRESS = 1, 2


@pytest.mark.parametrize(("width", "spark"), [(80, False), (100, True), (150, True)])
async def test_the_sparkline_shows_the_latest_samples_that_fit_or_none(
    width: int, spark: bool
) -> None:
    app = build_app()
    async with app.run_test(size=(width, 24)) as pilot:
        await prepare_view()(pilot)
        progress = screen_lines(app)[PROGRESS].rstrip()
        assert "…" not in progress
        assert ("done/5s" in progress) is spark
        # ▃: the newest sample, on the scale of them all whatever the width.
        assert progress.endswith("▃" if spark else "mean reward 0.917")


@pytest.mark.parametrize(
    ("width", "chips"),
    [
        (80, "not dispatched 2 success 3"),  # all would not fit: those that are not 0, whole
        (
            150,
            "not dispatched 2 queued 0 running 0 grading 0 success 3 failure 0 cancelled 0 "
            "stuck 0 untracked 0",
        ),
    ],
)
async def test_the_chips_that_are_not_0_are_in_sight(width: int, chips: str) -> None:
    app = build_app(StaticSource(finished_board(3), total=5))
    async with app.run_test(size=(width, 24)) as pilot:
        await pilot.pause()
        assert screen_lines(app)[CHIPS].split() == chips.split()


async def test_with_every_count_0_the_chips_still_show() -> None:
    app = build_app(StaticSource(finished_board(0), total=0))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert screen_lines(app)[CHIPS].split()[:4] == ["not", "dispatched", "0", "queued"]
