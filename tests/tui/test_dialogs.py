"""The modal screens at small sizes: from 60 columns and 24 lines nothing is out of reach."""

from __future__ import annotations

import pytest
from textual import events
from textual.message_pump import MessagePump
from textual.widgets import Button, Input, Static

from tests.tui.helpers import text_of
from tests.tui.states import build_app, rollout_id
from tui.screens.dialogs import ConfirmScreen, DialogFrame, HelpScreen, NewRolloutScreen, QuitScreen


@pytest.mark.parametrize(
    ("keys", "screen"),
    [
        (("c",), ConfirmScreen),
        (("q",), QuitScreen),
        (("n",), NewRolloutScreen),
        (("question_mark",), HelpScreen),
    ],
    ids=["confirm", "quit", "new", "help"],
)
@pytest.mark.parametrize("size", [(60, 24), (80, 24)])
async def test_a_dialog_fits_the_terminal(
    keys: tuple[str, ...], screen: type, size: tuple[int, int]
) -> None:
    app = build_app()
    async with app.run_test(size=size) as pilot:
        app.table.move_cursor_to(rollout_id(16))  # in flight: it can be cancelled
        await pilot.press(*keys)
        await pilot.pause()
        assert isinstance(app.screen, screen)
        frame = app.screen.query_one(DialogFrame)
        assert frame.region.x >= 0 and frame.region.right <= size[0]
        assert frame.region.y >= 0 and frame.region.bottom <= size[1]
        # Every button and input in full sight, without scrolling.
        for widget in [*app.screen.query(Button), *app.screen.query(Input)]:
            assert frame.region.contains_region(widget.region), widget


async def test_the_help_scrolls_to_its_end_at_80x24() -> None:
    app = build_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        frame = app.screen.query_one(DialogFrame)
        assert frame.has_focus  # the keys scroll it
        assert frame.max_scroll_y > 0, "at 80x24 the keys do not all fit: it must scroll"
        await pilot.press("end")
        await pilot.pause()
        assert frame.scroll_y == frame.max_scroll_y
        legend = text_of(app.screen.query(Static).last())
        assert "not admitted" in legend
        await pilot.press("home")
        await pilot.pause()
        assert frame.scroll_y == 0
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


def burst(app: MessagePump, keys: list[str]) -> None:
    """As a terminal's driver hands over the keys of one read: each posted to the app before
    the app has handled the first."""
    characters = {"tab": "\t", "shift+tab": None}
    for key in keys:
        app.post_message(events.Key(key, characters.get(key, key)))


async def test_the_new_rollout_form_keeps_a_burst_of_keys_in_order() -> None:
    """A terminal hands over a fast typist's keys in one read: the app takes them all before
    the first `tab` has moved the focus. What follows the `tab` belongs to the next field."""
    app = build_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("n")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, NewRolloutScreen)
        burst(app, [*"text", "tab", "4", "2"])
        await pilot.pause()
        await pilot.pause()
        assert form.query_one("#prompt", Input).value == "text"
        assert form.query_one("#label", Input).value == "42"
        # And back: shift+tab is as quick.
        burst(app, ["shift+tab", "!"])
        await pilot.pause()
        await pilot.pause()
        # The `!` went to the prompt (focusing a field selects its text, so it replaced it).
        assert form.query_one("#label", Input).value == "42"
        assert form.query_one("#prompt", Input).value == "!"
