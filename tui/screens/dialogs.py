"""Modal screens: y/n confirmation, the quit choice, the help, and a new rollout form.

Each sits in a `DialogFrame`: as wide as it likes up to the terminal's width, and scrolling
when the terminal is too short for it, so that nothing is lost from 60 columns or 24 lines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from rich.columns import Columns
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Static

from tui.sources.base import NewRollout

DIALOG_CSS = """
{name} {{
    align: center middle;
    background: $background 60%;
}}
{name} > DialogFrame {{
    width: 72;
    max-width: 100%;
    height: auto;
    max-height: 90%;
    border: thick $accent;
    background: $surface;
    padding: 1 2;
    scrollbar-size-vertical: 1;
}}
{name} Horizontal {{
    height: auto;
    align-horizontal: right;
    margin-top: 1;
}}
{name} Button {{
    margin-left: 1;
}}
"""


class DialogFrame(VerticalScroll, can_focus=False):
    """A dialog's box. It scrolls when it does not fit; the keys stay with its buttons and
    inputs (focusing one brings it into view)."""


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question; `y`/`n`/`escape` answer it."""

    DEFAULT_CSS = DIALOG_CSS.format(name="ConfirmScreen")
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", tooltip="Yes, do it", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", tooltip="No, change nothing", id="confirm.no"),
    ]

    def __init__(self, question: Text | str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with DialogFrame():
            yield Static(self.question)
            with Horizontal():
                yield Button("No (n)", id="no")
                yield Button("Yes (y)", id="yes", variant="error")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class QuitScreen(ModalScreen[str]):
    """Quitting with rollouts in flight: cancel them, leave them (to their leases, or to end
    with the servers the run started), or go back."""

    DEFAULT_CSS = DIALOG_CSS.format(name="QuitScreen")
    BINDINGS = [
        Binding(
            "c",
            "choose('cancel')",
            "Cancel them on the server",
            tooltip="Cancel the rollouts in flight on their servers, then quit",
            id="quit.cancel",
        ),
        Binding(
            "l",
            "choose('leave')",
            "Leave them",
            tooltip="Quit now without cancelling them (the question says what becomes of them)",
            id="quit.leave",
        ),
        Binding(
            "b,escape", "choose('back')", "Back", tooltip="Back to the dashboard", id="quit.back"
        ),
    ]

    def __init__(self, in_flight: int, *, servers_stop_with_run: bool) -> None:
        super().__init__()
        self.in_flight = in_flight
        self.servers_stop_with_run = servers_stop_with_run

    def compose(self) -> ComposeResult:
        count = (
            "1 rollout is still in flight."
            if self.in_flight == 1
            else f"{self.in_flight} rollouts are still in flight."
        )
        left = (
            # The run's own server (a workspace's, the demo's) is stopped as the run ends:
            # nothing is left running, though nothing is cancelled either.
            "l  leave them uncancelled: the rollout server this run started stops with it, "
            "and they end with it\n"
            if self.servers_stop_with_run
            else "l  leave them running: the server fails each one when its polling lease expires\n"
        )
        with DialogFrame():
            yield Static(
                Text.assemble(
                    (f"{count}\n\n", "bold"),
                    "c  cancel them on the server, wait for them to end, then quit\n",
                    left,
                    "b  back to the dashboard",
                )
            )
            with Horizontal():
                yield Button("Back (b)", id="back")
                yield Button("Leave (l)", id="leave", variant="warning")
                yield Button("Cancel them (c)", id="cancel", variant="error")

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(str(event.button.id))


class HelpFrame(DialogFrame, can_focus=True):
    """The help's box takes the keys itself: the arrows, page up and down, home and end
    scroll it."""


class HelpScreen(ModalScreen[None]):
    """Every key binding of the dashboard, with what it does."""

    DEFAULT_CSS = (
        DIALOG_CSS.format(name="HelpScreen")
        + """
    HelpScreen > DialogFrame { width: 88; }
    HelpScreen .legend-title { margin-top: 1; }
    """
    )
    BINDINGS = [
        Binding(
            "escape,q,question_mark,f1",
            "dismiss",
            "Close",
            tooltip="Back to the dashboard",
            id="help.close",
        )
    ]

    def __init__(
        self,
        bindings: Iterable[tuple[str, str]],
        legend: Iterable[tuple[str, str]],
        *,
        legend_title: str = "phase track: queued ─ running ─ grading ─ end",
    ) -> None:
        """`legend`: the glyphs the screen draws and what each means, under `legend_title`
        (none: no legend)."""
        super().__init__()
        self.bindings_shown = list(bindings)
        self.legend = list(legend)
        self.legend_title = legend_title

    def compose(self) -> ComposeResult:
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column()
        for key, description in self.bindings_shown:
            keys.add_row(key, description)
        # As many glyphs to a line as the width allows.
        legend = Columns(
            [Text.assemble((glyph, "bold"), f" {meaning}") for glyph, meaning in self.legend],
            padding=(0, 2),
        )
        with HelpFrame() as frame:
            # On the border: in sight however far the keys are scrolled.
            frame.border_title = "osmosis-tui keys"
            frame.border_subtitle = "↑ ↓ scroll · escape, q or ? closes"
            yield Static(keys)
            if self.legend:
                yield Label(Text(self.legend_title, "bold"), classes="legend-title")
                yield Static(legend)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


def _seconds_or_none(text: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError
    return value


class NewRolloutScreen(ModalScreen[NewRollout | None]):
    """`n`: type a prompt (and label, grading, timeouts) and send it as a new rollout."""

    DEFAULT_CSS = (
        DIALOG_CSS.format(name="NewRolloutScreen")
        + """
    NewRolloutScreen Grid {
        grid-size: 2;
        grid-columns: 16 1fr;
        grid-rows: auto;
        height: auto;
        grid-gutter: 0 1;
    }
    NewRolloutScreen Label { padding-top: 1; }
    NewRolloutScreen #error { color: $error; height: auto; }
    NewRolloutScreen #grade { margin-right: 1; }
    NewRolloutScreen .spacer { width: 1fr; }
    """
    )
    BINDINGS = [
        Binding(
            "escape", "cancel", "Close", tooltip="Close the form, send nothing", id="new.close"
        ),
        # Priority: the app moves the focus as it takes the `tab`, before it hands the keys
        # typed after it to a field. Without it the screen's own `tab` runs only once the
        # key has gone to the field and bubbled back, and a quick `text<Tab>42` lands whole
        # in the prompt.
        Binding(
            "tab",
            "app.focus_next",
            "Next field",
            tooltip="The form's next field or button",
            show=False,
            priority=True,
            id="new.next",
        ),
        Binding(
            "shift+tab",
            "app.focus_previous",
            "Previous field",
            tooltip="The form's previous field or button",
            show=False,
            priority=True,
            id="new.previous",
        ),
    ]

    def compose(self) -> ComposeResult:
        # The title on the border and the checkbox beside the buttons: the form fits in 24
        # lines.
        with DialogFrame() as frame:
            frame.border_title = "New rollout"
            with Grid():
                yield Label("prompt")
                yield Input(placeholder="What is 17 * 23?", id="prompt")
                yield Label("label")
                yield Input(placeholder="ground truth (optional)", id="label")
                yield Label("agent timeout")
                yield Input(placeholder="seconds (optional)", id="agent")
                yield Label("grader timeout")
                yield Input(placeholder="seconds (optional)", id="grader")
            yield Static("", id="error")
            with Horizontal():
                yield Checkbox("grade it", value=True, id="grade")
                yield Static(classes="spacer")
                yield Button("Cancel", id="cancel")
                yield Button("Send", id="send", variant="primary")

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_input_submitted(self) -> None:
        self._send()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "send":
            self._send()
        else:
            self.dismiss(None)

    def _send(self) -> None:
        prompt = self.query_one("#prompt", Input).value
        label = self.query_one("#label", Input).value
        error = self.query_one("#error", Static)
        if not prompt.strip():
            error.update("the prompt is empty")
            return
        try:
            agent = _seconds_or_none(self.query_one("#agent", Input).value)
            grader = _seconds_or_none(self.query_one("#grader", Input).value)
        except ValueError:
            error.update("timeouts are seconds: a finite number, 0 or more, or empty")
            return
        self.dismiss(
            NewRollout(
                prompt=prompt,
                label=label or None,
                grade=self.query_one("#grade", Checkbox).value,
                agent_timeout_sec=agent,
                grader_timeout_sec=grader,
            )
        )
