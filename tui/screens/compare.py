"""The compare screen (`osmosis-tui compare A B` on a terminal): what changed from run A to
run B, row by row (DESIGN.md §2, across runs).

On top, the runs, the verdict with its statistics and method, and every note of the pairing;
then a chip per class with its count; then the rows, those that differ first (regressed ones
before the rest, `differing_rows`). A key per class (`1` … `9`, as the chips show) or `c`,
which cycles through them, filters the rows to those with an item of that class; `0` shows
all again. `n`/`]` and `p`/`[` jump to the next or previous row that changed; `enter` opens
both sides of the row (screens/row_sides.py).
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Static

from core.eval.compare.comparison import Comparison, RowComparison, differing_rows
from core.eval.compare.outcomes import CLASSES, ItemClass
from tui.screens.row_sides import RowSidesScreen
from tui.widgets.compare_header import CLASS_KEYS, ClassChips, CompareHeader
from tui.widgets.compare_table import CompareTable
from tui.widgets.fitted_footer import FittedFooter

FOOTER_PRIORITY = (
    "quit",
    "help",
    "open_row",
    "next_change",
    "previous_change",
    "cycle_class",
    "back",
)


class CompareScreen(Screen[None]):
    """Two runs compared (see the module docstring). `back`: whether `escape` (with no class
    chosen) goes back to the screen that opened this one (the runs screen)."""

    DEFAULT_CSS = """
    CompareScreen #compare-status {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
    }
    """
    BINDINGS = [
        Binding(
            "enter",
            "open_row",
            "Both sides",
            tooltip="The selected row's attempts, run A beside run B, with their transcripts",
            id="compare.open-row",
        ),
        Binding(
            "n,right_square_bracket",
            "next_change",
            "Next diff",
            tooltip="The next row that changed from A to B",
            id="compare.next",
        ),
        Binding(
            "p,left_square_bracket",
            "previous_change",
            "Prev diff",
            tooltip="The previous row that changed from A to B",
            id="compare.previous",
        ),
        Binding(
            "c",
            "cycle_class",
            "Class",
            tooltip="Show the rows of the next class (the chips' order), then all",
            id="compare.cycle",
        ),
        *(
            Binding(
                key,
                f"show_class('{name}')",
                name,
                tooltip=f"Show only the rows with a work item {name}; again: all",
                show=False,
                id=f"compare.class-{name.replace('_', '-').lower()}",
            )
            for name, key in CLASS_KEYS.items()
        ),
        Binding(
            "0",
            "show_all",
            "All",
            tooltip="Show every row again",
            show=False,
            id="compare.all",
        ),
        Binding(
            "escape",
            "back",
            "Back",
            tooltip="Show every row again; with every row shown, back to the runs list",
            show=False,
            id="compare.back",
        ),
    ]

    #: The class the rows are filtered to; None: every row.
    chosen: var[ItemClass | None] = var(None, init=False)

    def __init__(self, comparison: Comparison, *, back: bool = False) -> None:
        super().__init__()
        self.comparison = comparison
        self.back = back
        #: Every row in reading order, computed once: a filter only selects from it.
        self.ordered = differing_rows(comparison.rows)
        runs = comparison.a, comparison.b
        self.table = CompareTable(pass_at_k=all(run.n > 1 for run in runs), id="compare-table")

    def compose(self) -> ComposeResult:
        header = CompareHeader(id="compare-header")
        header.show(self.comparison)
        yield header
        chips = ClassChips(id="class-chips")
        chips.show(self.comparison, None)
        yield chips
        yield self.table
        yield Static(id="compare-status")
        yield FittedFooter(FOOTER_PRIORITY)

    def on_mount(self) -> None:
        self._show_rows()
        self.table.focus()

    @property
    def shown(self) -> list[RowComparison]:
        chosen = self.chosen
        if chosen is None:
            return self.ordered
        return [row for row in self.ordered if row.classes.get(chosen)]

    def watch_chosen(self, chosen: ItemClass | None) -> None:
        self.query_one(ClassChips).show(self.comparison, chosen)
        self._show_rows()

    def _show_rows(self) -> None:
        self.table.show(self.shown)

    @on(CompareTable.CursorMoved)
    def _cursor_moved(self) -> None:
        self._show_status()

    def _show_status(self) -> None:
        table = self.table
        total = len(self.comparison.rows)
        changed = len(table.changed_at)
        where = f"row {table.cursor + 1:,} of {len(table.rows):,}" if table.rows else "no row shown"
        shown = f"{len(table.rows):,} of {total:,} rows"
        chosen = "" if self.chosen is None else f" · only {self.chosen}"
        status = f"{where} · {shown}{chosen} · {changed:,} changed"
        self.query_one("#compare-status", Static).update(status)

    # -- actions ---------------------------------------------------------------------------

    def action_show_class(self, name: ItemClass) -> None:
        self.chosen = None if name == self.chosen else name

    def action_show_all(self) -> None:
        self.chosen = None

    def action_cycle_class(self) -> None:
        order: list[ItemClass | None] = [*CLASSES, None]
        self.chosen = order[(order.index(self.chosen) + 1) % len(order)]

    def action_next_change(self) -> None:
        if not self.table.next_change(1):
            self.notify("no row below that changed", timeout=3)

    def action_previous_change(self) -> None:
        if not self.table.next_change(-1):
            self.notify("no row above that changed", timeout=3)

    def action_open_row(self) -> None:
        row = self.table.cursor_row
        if row is not None:
            self.app.push_screen(RowSidesScreen(self.comparison, row))

    def action_back(self) -> None:
        if self.chosen is not None:
            self.chosen = None
        elif self.back:
            self.dismiss(None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return self.chosen is not None or self.back
        return True
