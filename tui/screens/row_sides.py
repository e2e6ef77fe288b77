"""`enter` on the compare screen: both sides of one source row, attempt by attempt, A beside B
(one above the other on a terminal narrower than `NARROW_COLUMNS`): each work item's status,
reward, error type, duration, tokens and rollout id, and its conversation as the rollout
server left it in the run folder (`rollout_trials/<rollout_id>/trajectory.json`), drawn by the
transcript view's own renderers (widgets/transcript.py). `escape` goes back.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from core.eval.compare.compared_run import ComparedRun, PairKey
from core.eval.compare.comparison import Comparison, RowComparison
from core.eval.compare.outcomes import ItemClass, outcome_of
from core.eval.duration_text import duration
from core.eval.results.folder import TRIALS_DIR
from core.eval.results.records import ItemResult
from core.eval.results.trials import TRAJECTORY_FILE
from core.transcript import preview_path, read_trajectory
from tui.widgets.compare_table import CLASS_STYLES, class_cells
from tui.widgets.fitted_footer import FittedFooter
from tui.widgets.format import plain, reward
from tui.widgets.transcript import Shown, header, steps

#: Below this many columns the two sides of an attempt stand one above the other: beside each
#: other, each would get fewer than 60 columns for its transcript.
NARROW_COLUMNS = 120
FOOTER_PRIORITY = ("quit", "help", "back", "next_attempt", "previous_attempt")
OUTCOME_STYLES = {"pass": "green", "failure": "red", "error": "red", "skipped": "yellow"}


def attempts_of(comparison: Comparison, source_row: int) -> list[int]:
    """Every attempt of the row that either run planned or journaled, ascending."""
    return sorted(
        {
            *comparison.a.attempts_by_row.get(source_row, ()),
            *comparison.b.attempts_by_row.get(source_row, ()),
        }
    )


def classes_of(comparison: Comparison, source_row: int) -> dict[int, ItemClass]:
    """The class of each of the row's attempts that was classed."""
    return {
        attempt: name
        for name, keys in comparison.classes.items()
        for row, attempt in keys
        if row == source_row
    }


def side_facts(label: str, run: ComparedRun, key: PairKey) -> RenderableType:
    """What one run's work item came to, in a few lines."""
    title = Text.assemble((f"{label}  ", "bold"), plain(run.name, "bold"))
    if key[1] not in run.attempts_by_row.get(key[0], ()):
        return Group(title, Text("not in this run", "dim"))
    result = run.results.get(key)
    if result is None:
        return Group(title, Text("pending: no result journaled", "blue"))
    return Group(title, *_result_lines(result, run.threshold))


def _result_lines(result: ItemResult, threshold: float) -> list[Text]:
    outcome = outcome_of(result, threshold)
    first = Text.assemble(
        (outcome.kind, f"bold {OUTCOME_STYLES[outcome.kind]}"),
        f"  status {result.status} · reward {reward(result.reward)}",
    )
    if result.error_type is not None:
        first.append_text(plain(f" · error {result.error_type}", "red"))
    tokens = "-" if result.tokens is None else f"{result.tokens:,}"
    second = Text(f"duration {duration(result.duration_ms / 1000)} · tokens {tokens}")
    third = Text.assemble(("rollout ", "dim"), plain(result.rollout_id, "dim"))
    return [first, second, third]


def transcript_of(run: ComparedRun, key: PairKey) -> RenderableType:
    """The work item's conversation from its run folder, or why there is none."""
    result = run.results.get(key)
    if result is None:
        return Text("")
    root = run.folder / TRIALS_DIR
    path = preview_path(root, result.rollout_id, TRAJECTORY_FILE)
    transcript = None if path is None else read_trajectory(path, root=root)
    problem = f"no trajectory in {Path(TRIALS_DIR) / result.rollout_id / TRAJECTORY_FILE}"
    shown = Shown(result.rollout_id, transcript, None if transcript is not None else problem)
    if transcript is None:
        return header(shown, 0.0)
    # A trajectory's header says nothing of the clock: its age is a preview's only.
    return Group(header(shown, 0.0), Text(""), steps(transcript, None))


class RowSidesScreen(Screen[None]):
    """Both sides of one row (see the module docstring)."""

    DEFAULT_CSS = """
    RowSidesScreen #row-title {
        height: auto;
        padding: 0 1;
        background: $panel;
    }
    RowSidesScreen #sides {
        height: 1fr;
    }
    RowSidesScreen .attempt-title {
        height: auto;
        padding: 0 1;
        margin-top: 1;
        background: $boost;
        text-style: bold;
    }
    RowSidesScreen .pair {
        height: auto;
        layout: horizontal;
    }
    RowSidesScreen .side {
        width: 1fr;
        height: auto;
        padding: 0 1;
    }
    RowSidesScreen .side-b {
        border-left: solid $panel-lighten-2;
    }
    RowSidesScreen.-narrow .pair {
        layout: vertical;
    }
    RowSidesScreen.-narrow .side {
        width: 100%;
    }
    RowSidesScreen.-narrow .side-b {
        border-left: none;
        border-top: dashed $panel-lighten-2;
    }
    """
    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="Back to the compared rows", id="sides.back"),
        Binding(
            "n,right_square_bracket",
            "next_attempt",
            "Next attempt",
            tooltip="Scroll to the row's next attempt",
            id="sides.next",
        ),
        Binding(
            "p,left_square_bracket",
            "previous_attempt",
            "Previous attempt",
            tooltip="Scroll to the row's previous attempt",
            id="sides.previous",
        ),
    ]

    def __init__(self, comparison: Comparison, row: RowComparison) -> None:
        super().__init__()
        self.comparison = comparison
        self.row = row
        self.attempts = attempts_of(comparison, row.source_row)
        self._shown_attempt = 0

    def compose(self) -> ComposeResult:
        comparison, row = self.comparison, self.row
        title = Text.assemble(
            ("row ", "bold"),
            (str(row.source_row), "bold"),
            "  A ",
            plain(comparison.a.name, "bold"),
            " → B ",
            plain(comparison.b.name, "bold"),
            "  ",
        )
        for position, (text, style) in enumerate(class_cells(row)):
            title.append((", " if position else "") + text, style)
        yield Static(title, id="row-title")
        classes = classes_of(comparison, row.source_row)
        with VerticalScroll(id="sides"):
            for attempt in self.attempts:
                name = classes.get(attempt)
                label = Text(f"attempt {attempt}", "bold")
                if name is not None:
                    label.append(f"  {name}", CLASS_STYLES.get(name, ""))
                yield Static(label, classes="attempt-title", id=f"attempt-{attempt}")
                with Container(classes="pair"):
                    for side, run in (("a", comparison.a), ("b", comparison.b)):
                        key = (row.source_row, attempt)
                        with Vertical(classes=f"side side-{side}"):
                            yield Static(side_facts(side.upper(), run, key), classes="facts")
                            yield Static(transcript_of(run, key), classes="transcript")
        yield FittedFooter(FOOTER_PRIORITY)

    def on_mount(self) -> None:
        self._fit()
        self.query_one("#sides", VerticalScroll).focus()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        self.set_class(self.size.width < NARROW_COLUMNS, "-narrow")

    def action_back(self) -> None:
        self.dismiss(None)

    def _go_to_attempt(self, position: int) -> None:
        if not self.attempts:
            return
        self._shown_attempt = min(max(position, 0), len(self.attempts) - 1)
        attempt = self.attempts[self._shown_attempt]
        target = self.query_one(f"#attempt-{attempt}", Static)
        self.query_one("#sides", VerticalScroll).scroll_to_widget(target, animate=False, top=True)

    def action_next_attempt(self) -> None:
        self._go_to_attempt(self._shown_attempt + 1)

    def action_previous_attempt(self) -> None:
        self._go_to_attempt(self._shown_attempt - 1)
