"""Snapshots of the run timeline (`w`): a live run's and a replay's, at 160×45 and 80×24,
and in a light theme. Plain functions, as in test_snapshots.py: a frozen clock (a replay's
is its own recording's, which stands still while nothing plays), a fixed theme, no
animations."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest
from textual.pilot import Pilot

from tests.tui.recordings import replay_app
from tests.tui.states import THEME, build_app
from tests.tui.timeline_states import live_timeline_source, write_timeline_run
from tui.app import DashboardApp
from tui.sources.replay import ReplaySource

LARGE, SMALL = (160, 45), (80, 24)


@pytest.mark.parametrize("size", [LARGE, SMALL], ids=["large", "small"])
def test_live_timeline(
    size: tuple[int, int], snap_compare: Callable[..., bool], clean_terminal: None
) -> None:
    """Opened at now: the rollouts in flight now below it, the limit's line, two servers'
    lanes (one down now), the rail and the markers (a cancel, one sent by hand, an untrack,
    the stuck flag)."""
    assert snap_compare(build_app(live_timeline_source()), press=("w",), terminal_size=size)


def _replay(folder: Path, theme: str) -> tuple[DashboardApp, ReplaySource]:
    app, source = replay_app(write_timeline_run(folder))
    app.start_work = False  # the player stands still: the picture is the same every time
    app.theme = theme
    app.animation_level = "none"
    return app, source


def _played_to(source: ReplaySource, seconds: float) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        source.seek(seconds)
        cast(DashboardApp, pilot.app).repaint()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize(
    ("size", "theme"),
    [(LARGE, THEME), (SMALL, THEME), ((100, 30), "textual-light")],
    ids=["large", "small", "light"],
)
def test_replay_timeline(
    size: tuple[int, int],
    theme: str,
    tmp_path: Path,
    snap_compare: Callable[..., bool],
    clean_terminal: None,
) -> None:
    """A replay played to 42 s, its timeline opened and zoomed in around a cursor moved back
    to the pause: the whole recording's band against the limit raised then lowered, both
    servers' lanes with their refusals, and the markers where the log has them."""
    app, source = _replay(tmp_path / "timeline-run", theme)
    assert snap_compare(
        app,
        press=("w", "home", *("right",) * 25, "i"),
        terminal_size=size,
        run_before=_played_to(source, 42.0),
    )
