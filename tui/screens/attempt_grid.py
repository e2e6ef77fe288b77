"""`a`: the rows × attempts grid over the dashboard, for a run of more than one attempt per
row (`--n`): a line per dataset row with a glyph per attempt, its passes and pass@k, the rows
that pass only sometimes first (DESIGN.md §2, across runs; issue 25 item 6).

It follows the run as the table does: the dashboard's repaint timer calls `repaint`, which
takes the board's changes since the last one (the grid's own feed, widgets/grid/rows.py) and
redraws only the rows they touched. Built from the board and the source's pass rule, it is
the same for a live run, a replay (it follows the playback; the player's keys, which can give
the dashboard a new board, are behind it) and a run attached to. `enter` goes back to the
table on that row's rollouts; `escape` goes back as it was. With one attempt per row it says
what it needs.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from core.board import RolloutBoard
from tui.sources.base import DashboardSource
from tui.widgets.grid.grid_view import AttemptGridView
from tui.widgets.grid.rows import GLYPHS, LEGEND, AttemptGrid, GridCounts, GridRow

#: What the grid says for a run of one attempt per row.
ONE_ATTEMPT = (
    "The rows × attempts grid needs more than one attempt per row, and this run makes one "
    "(n = 1): every row would pass always or never. Run the eval with --n 4 (or more) to see "
    "which rows pass only sometimes."
)


def counts_text(counts: GridCounts) -> Text:
    """The header's counts: rows per class (the flaky ones first, as the grid orders them),
    then the run's pass@k so far."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{counts.flaky} flaky", "bold yellow" if counts.flaky else "")
    text.append(f" · {counts.always_fail} always fail · {counts.always_pass} always pass")
    if counts.all_skipped:
        text.append(f" · {counts.all_skipped} all skipped")
    text.append(f" · {counts.unfinished} unfinished", "dim")
    return text


def pass_at_k_text(counts: GridCounts, threshold: float) -> Text:
    points = " · ".join(f"pass@{k} {value:.2f}" for k, value in counts.pass_at_k)
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(points or "pass@k: no attempt graded yet")
    text.append(f"  (pass: reward ≥ {threshold:g})", "dim")
    return text


def legend_text() -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for index, (outcome, meaning) in enumerate(LEGEND):
        glyph, style = GLYPHS[outcome]
        text.append("  " if index else "")
        text.append(glyph, style)
        text.append(f" {meaning}", "dim")
    return text


class AttemptGridScreen(ModalScreen[GridRow | None]):
    """The grid of one run; dismissed with the row chosen (`enter`), or None (`escape`)."""

    DEFAULT_CSS = """
    AttemptGridScreen {
        background: $background;
    }
    AttemptGridScreen .grid-line {
        height: 1;
        padding: 0 1;
    }
    AttemptGridScreen #grid-title {
        background: $panel;
        text-style: bold;
    }
    AttemptGridScreen #grid-one-attempt {
        padding: 1 2;
    }
    """
    BINDINGS = [
        Binding("escape,a", "close", "Back", tooltip="Back to the table", id="grid.close"),
        Binding(
            "question_mark,f1",
            "app.help",
            "Help",
            tooltip="All keys and the phase track legend",
            id="grid.help",
        ),
        Binding("q", "app.quit_dashboard", "Quit", tooltip="Quit the dashboard", id="grid.quit"),
    ]

    def __init__(self, source: DashboardSource, board: RolloutBoard) -> None:
        """`board` is the board the dashboard shows (a replay's keys, which give it a new
        one, are behind this screen: it opens again on the new one)."""
        super().__init__()
        self.source = source
        self.grid = grid = AttemptGrid(board, source.pass_rule, source.carried_results())
        # The run's rows: its work items over n, which no repaint changes (asked once: a live
        # run counts its progress over every result); the rows seen, when a replayed run's
        # manifest does not say how many.
        self._total_rows = source.progress().total // grid.n
        self._title = Static(classes="grid-line", id="grid-title")
        self._counts = Static(classes="grid-line", id="grid-counts")
        self._pass_at_k = Static(classes="grid-line", id="grid-pass-at-k")
        self._view = AttemptGridView(self.grid, id="grid-view")

    @property
    def one_attempt(self) -> bool:
        """The run makes one attempt per row (as far as it says, else as far as seen)."""
        return self.grid.n <= 1

    def compose(self) -> ComposeResult:
        yield self._title
        if self.one_attempt:
            yield Static(ONE_ATTEMPT, id="grid-one-attempt")
        else:
            yield self._counts
            yield self._pass_at_k
            yield Static(legend_text(), classes="grid-line", id="grid-legend")
            yield self._view
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._show_header()

    def on_unmount(self) -> None:
        self.grid.close()

    def repaint(self) -> None:
        """Catch up with the board (the dashboard's repaint timer calls this)."""
        if self.one_attempt:
            return
        changed = self.grid.update()
        if changed:
            self._view.rows_changed(changed)
            self._show_header()

    def _show_header(self) -> None:
        grid = self.grid
        total_rows = max(self._total_rows, len(grid.rows))
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append("Rows × attempts")
        title.append(f"  {len(grid.rows)} of {total_rows} rows started · n = {grid.n}", "dim")
        self._title.update(title)
        if self.one_attempt:
            return
        counts = grid.counts(total_rows)
        self._counts.update(counts_text(counts))
        self._pass_at_k.update(pass_at_k_text(counts, grid.rule.threshold))

    def on_attempt_grid_view_row_chosen(self, event: AttemptGridView.RowChosen) -> None:
        self.dismiss(event.row)

    def action_close(self) -> None:
        self.dismiss(None)
