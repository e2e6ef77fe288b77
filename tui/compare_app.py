"""The dashboard's compare app (`osmosis-tui compare` on a terminal): the compare screen of two
runs (screens/compare.py), opened on a comparison, or the runs screen (screens/runs.py) to
pick them from; `enter` on a row opens both its sides (screens/row_sides.py).

Every screen keeps `q` (quit) and `?`/F1 (help, listing the keys of the screen shown) in its
footer. The app's return value is none; `shown` is the comparison the user saw last, which
`--fail-on-regression` judges once the app is closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.actions import parse as parse_action
from textual.app import App
from textual.binding import ActiveBinding, Binding

from core.eval.attach.run_list import ListedRun
from core.eval.compare.comparison import Comparison
from tui.screens.compare import CompareScreen
from tui.screens.dialogs import HelpScreen
from tui.screens.runs import RunsScreen


@dataclass(frozen=True)
class RunsChoice:
    """What the runs screen lists, and what is given already."""

    runs: list[ListedRun]
    root: Path
    #: The run folder given on the command line: it is B.
    given_b: Path | None = None
    threshold: float | None = None


class CompareApp(App[None]):
    """Two runs compared, or the runs to pick them from (see the module docstring)."""

    TITLE = "osmosis-tui compare"
    BINDINGS = [
        Binding(
            "question_mark,f1",
            "help",
            "Help",
            tooltip="Every key of this screen",
            id="compare-app.help",
        ),
        Binding("q", "quit", "Quit", tooltip="Quit", id="compare-app.quit"),
    ]

    def __init__(
        self, comparison: Comparison | None = None, *, runs: RunsChoice | None = None
    ) -> None:
        """Open on `comparison`, or on the runs screen (`runs`) to pick one."""
        super().__init__()
        if (comparison is None) == (runs is None):
            raise ValueError("the compare app opens on a comparison or on a runs list")
        self.comparison = comparison
        self.runs_choice = runs
        self._runs_screen: RunsScreen | None = None

    def on_mount(self) -> None:
        if self.comparison is not None:
            self.push_screen(CompareScreen(self.comparison))
            return
        choice = self.runs_choice
        assert choice is not None
        self._runs_screen = RunsScreen(
            choice.runs, choice.root, given_b=choice.given_b, threshold=choice.threshold
        )
        self.push_screen(self._runs_screen)

    @property
    def shown(self) -> Comparison | None:
        """The comparison shown last (None: the runs screen opened none)."""
        if self._runs_screen is not None:
            return self._runs_screen.compared
        return self.comparison

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(help_lines(self), [], legend_title=""))


#: Keys the help lists as one line each, by their action's name: what they do.
FAMILIES = {
    "show_class": "Show only the rows with a work item of one class, numbered as the chips "
    "are; again: every row",
}


def help_lines(app: App[Any]) -> list[tuple[str, str]]:
    """(keys, what they do) for every key of ours the screen shown answers, one line per
    binding (its keys joined) or per family of keys (`FAMILIES`): the screen's own first,
    then its focused widget's, then the app's. Textual's own keys (focus, copy, the
    scrollbars') are left out: they are not ours to explain."""
    screen = app.screen

    def rank(active: ActiveBinding) -> int:
        return 0 if active.node is screen else 2 if active.node is app else 1

    lines: dict[str, tuple[list[str], str]] = {}
    for active in sorted(screen.active_bindings.values(), key=rank):
        binding = active.binding
        if binding.id is None:
            continue
        name = parse_action(binding.action)[1]
        family = FAMILIES.get(name)
        entry = lines.setdefault(
            name if family else binding.id, ([], family or binding.tooltip or binding.description)
        )
        entry[0].append(app.get_key_display(binding))
    shown = [
        (f"{keys[0]} … {keys[-1]}" if name in FAMILIES else ", ".join(keys), what)
        for name, (keys, what) in lines.items()
    ]
    if not any("↑" in keys for keys, _ in shown):
        # The runs list's and the transcripts' moves are Textual's own: said once, plainly.
        shown.append(("↑ ↓ pgup pgdn home end", "Move the cursor, or scroll"))
    return shown


def create_compare_app(
    comparison: Comparison | None = None, *, runs: RunsChoice | None = None
) -> CompareApp:
    """The one way to build the compare app, shared by the command and the tests."""
    return CompareApp(comparison, runs=runs)
