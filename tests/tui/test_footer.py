"""The footer at every width: the least needed keys give way, quit and help always stay."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.binding import Binding
from textual.widgets._footer import FooterKey

from core.phases import PhaseMark
from core.types import RolloutStatus
from tests.tui.helpers import screen_lines, until
from tests.tui.recordings import replay_app, write_recording
from tests.tui.states import NOW, build_app, running_source
from tui.bindings import DASHBOARD_BINDINGS, FOOTER_PRIORITY, help_lines
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


async def test_the_footer_is_composed_again_only_when_what_a_key_does_changed() -> None:
    """A change to the selected rollout that leaves every key as it was does not rebuild
    the footer (Textual recomposes it on every `refresh_bindings`); one that changes what a
    key can do does, and the key shows it."""
    source = running_source()
    app = build_app(source)
    async with app.run_test(size=(160, 24)) as pilot:
        await until(pilot, lambda: bool(screen_lines(app)[-1].strip()))
        in_flight = next(record for record in source.board if record.in_flight)
        app.table.move_cursor_to(in_flight.rollout_id)
        await pilot.pause()
        footer = app.query_one(FittedFooter)
        keys = list(footer.query(FooterKey))
        # What makes the footer compose its keys again (Textual's signal, published
        # synchronously by `refresh_bindings`).
        published: list[object] = []
        app.screen.bindings_updated_signal.subscribe(app.screen, published.append, immediate=True)

        # The server reports the rollout's next phase: the row changes, its keys do not.
        following = {RolloutStatus.QUEUED: RolloutStatus.RUNNING}
        phase = following.get(in_flight.status, RolloutStatus.GRADING)
        app.board.server_mark(in_flight.rollout_id, PhaseMark(phase, NOW - 0.5, "server"))
        app.repaint()
        await pilot.pause()
        assert in_flight.status == phase
        assert in_flight.in_flight
        assert published == []  # the footer is left as it is

        source.can_send = False  # the servers went away: nothing can be sent
        app.repaint()
        assert len(published) == 1

        def new_rollout_disabled() -> bool:
            # The recomposed footer mounts its keys over a few frames; wait for the one asserted.
            keys_now = list(footer.query(FooterKey))
            new = [key for key in keys_now if key.action == "new_rollout"]
            return keys_now != keys and bool(new) and new[0].has_class("-disabled")

        await until(pilot, new_rollout_disabled)


@pytest.mark.parametrize("width", [80, 160])
async def test_the_footer_offers_pausing_the_run_not_freezing_the_screen(width: int) -> None:
    """`P` pauses the run (dispatch) and is what the footer offers as "Pause"; `p` only
    freezes the screen, is named so, and leaves the footer to it."""
    app = build_app()
    async with app.run_test(size=(width, 24)) as pilot:
        await until(pilot, lambda: bool(screen_lines(app)[-1].strip()))
        footer = app.query_one(FittedFooter)
        labels = [f"{k.key_display} {k.description}" for k in footer.query(FooterKey) if k.display]
        assert "P Pause run" in labels
        assert not any(label.startswith("p ") for label in labels)
        keys = dict(help_lines(app))
        assert keys["p"].startswith("Freeze the screen")
        assert keys["P"].startswith("Pause or resume the run")


async def test_a_replay_keeps_p_as_its_playback_pause(tmp_path: Path) -> None:
    app, _ = replay_app(write_recording(tmp_path, [(0.0, "a" * 32, 0, "queued")]))
    async with app.run_test(size=(160, 24)) as pilot:
        await until(pilot, lambda: bool(screen_lines(app)[-1].strip()))
        footer = app.query_one(FittedFooter)
        labels = [f"{k.key_display} {k.description}" for k in footer.query(FooterKey) if k.display]
        assert "p Pause" in labels and "P Pause run" not in labels


async def test_the_help_says_space_marks_and_moves_down() -> None:
    app = build_app()
    async with app.run_test(size=(160, 24)):
        assert "the cursor moves down" in dict(help_lines(app))["space"]
