"""The footer at every width: the least needed keys give way, quit and help always stay."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.binding import Binding
from textual.widgets._footer import FooterKey

from tests.tui.helpers import screen_lines, until
from tests.tui.recordings import replay_app, write_recording
from tests.tui.states import build_app
from tui.bindings import DASHBOARD_BINDINGS, FOOTER_PRIORITY
from tui.widgets.fitted_footer import FittedFooter


def test_every_footer_key_has_its_place_in_the_priorities() -> None:
    shown = [b.action for b in DASHBOARD_BINDINGS if isinstance(b, Binding) and b.show]
    assert sorted(shown) == sorted(set(FOOTER_PRIORITY) - {"command_palette"})


@pytest.mark.parametrize("replay", [False, True], ids=["live", "replay"])
@pytest.mark.parametrize("width", [60, 80, 100, 160])
async def test_the_footer_keeps_quit_and_help_and_nothing_spills(
    width: int, replay: bool, tmp_path: Path
) -> None:
    if replay:  # its own keys (step, faster, slower) instead of the live ones
        app, _ = replay_app(write_recording(tmp_path, [(0.0, "a" * 32, 0, "queued")]))
    else:
        app = build_app()
    async with app.run_test(size=(width, 24)) as pilot:
        # The footer composes its keys after the first refresh: wait until they are drawn.
        def footer_drawn() -> bool:
            return bool(screen_lines(app)[-1].strip())

        await until(pilot, footer_drawn)
        footer = app.query_one(FittedFooter)
        keys = [key for key in footer.query(FooterKey) if key.display]
        labels = [f"{key.key_display} {key.description}" for key in keys]
        assert {"q Quit", "? Help"} <= set(labels)
        if width >= 80:
            assert "l Log" in labels
        if width >= 160:  # room for all of them
            assert len(labels) == len(footer.query(FooterKey))
        # What the terminal shows on the footer's line: those keys and nothing else (no
        # letter of a key that did not fit peeking out beside the palette's).
        drawn = screen_lines(app)[-1]
        assert " ".join(drawn.replace("▏", " ").split()) == " ".join(" ".join(labels).split())
        assert sum(len(label) + 1 for label in labels) + 1 <= width
