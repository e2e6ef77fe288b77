"""The runs screen (`osmosis-tui compare` on a terminal with fewer than two runs given): the
runs under the results root, as `osmosis-tui runs` lists them (`core.eval.attach.run_list`),
to pick the two to compare.

`space` marks a run: the first marked is A (the run compared from), the second B (the run
compared to); a third mark replaces the oldest. `enter` compares: the two marked runs, or the
one marked (A) with the run under the cursor (B). A run given on the command line is B
(`osmosis-tui compare RUN` reads "compare RUN with …"): then `enter` compares the marked run,
or the one under the cursor, as A to it. The comparison opens on the compare screen, and
`escape` there comes back here.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from core.eval.attach.run_list import ListedRun, local_time
from core.eval.compare.compared_run import CompareInputError
from core.eval.compare.comparison import Comparison, compare_folders
from core.eval.safe_text import multi_line
from tui.screens.compare import CompareScreen
from tui.widgets.fitted_footer import FittedFooter
from tui.widgets.format import plain

FOOTER_PRIORITY = ("quit", "help", "compare", "mark")
COLUMNS = ("", "name", "status", "done", "pass", "started", "by")


class RunsScreen(Screen[None]):
    """The runs to pick from (see the module docstring). `given_b`: the run folder given on
    the command line, which is B; `threshold`: `--pass-threshold`, for both runs."""

    DEFAULT_CSS = """
    RunsScreen #runs-help {
        height: auto;
        padding: 0 1;
        background: $panel;
    }
    RunsScreen DataTable {
        height: 1fr;
    }
    """
    BINDINGS = [
        Binding(
            "space",
            "mark",
            "Mark",
            tooltip="Mark the run as A (the first marked) or B (the second)",
            id="runs.mark",
        ),
        Binding(
            "enter",
            "compare",
            "Compare",
            tooltip="Compare the marked runs (one marked: it as A, the run under the cursor as B)",
            priority=True,
            id="runs.compare",
        ),
    ]

    def __init__(
        self,
        runs: list[ListedRun],
        root: Path,
        *,
        given_b: Path | None = None,
        threshold: float | None = None,
    ) -> None:
        super().__init__()
        self.runs = runs
        self.root = root
        self.given_b = given_b
        self.threshold = threshold
        #: The marked runs' folders, in the order they were marked.
        self.marks: list[Path] = []
        #: The comparison this screen opened last (None: none yet).
        self.compared: Comparison | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._help_text(), id="runs-help")
        table: DataTable[Text | str] = DataTable(cursor_type="row", zebra_stripes=True)
        table.add_column("", width=1, key="mark")
        for column in COLUMNS[1:]:
            table.add_column(column, key=column)
        for run in self.runs:
            table.add_row(*self._cells(run), key=str(run.folder))
        yield table
        yield FittedFooter(FOOTER_PRIORITY)

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()

    def _help_text(self) -> Text:
        root = plain(str(self.root), "bold")
        if not self.runs:
            return Text.assemble("no runs under ", root, ": nothing to compare (q quits)")
        if self.given_b is not None:
            return Text.assemble(
                "Compare to B = ",
                plain(self.given_b.name, "bold"),
                ": enter compares the run under the cursor (or the one marked with space), "
                "as A, to it.",
            )
        return Text.assemble(
            "Runs under ",
            root,
            ": space marks A (the run compared from), then B (compared to); enter compares "
            "them (with one marked: it, as A, to the run under the cursor).",
        )

    def _label(self, folder: Path) -> str:
        if folder == self.given_b:
            return "B"
        if folder not in self.marks:
            return ""
        return "AB"[self.marks.index(folder)]

    def _cells(self, run: ListedRun) -> tuple[Text | str, ...]:
        total = "?" if run.total is None else f"{run.total:,}"
        rate = "-" if run.pass_rate is None else f"{run.pass_rate:.0%}"
        return (
            Text(self._label(run.folder), "bold reverse"),
            plain(run.name),
            run.status,
            f"{run.done:,}/{total}",
            rate,
            local_time(run.started_at),
            run.tool,
        )

    def _cursor_run(self) -> ListedRun | None:
        table = self.query_one(DataTable)
        if not self.runs or not 0 <= table.cursor_row < len(self.runs):
            return None
        return self.runs[table.cursor_row]

    def _relabel(self) -> None:
        table = self.query_one(DataTable)
        for run in self.runs:
            table.update_cell(
                str(run.folder), "mark", Text(self._label(run.folder), "bold reverse")
            )

    # -- actions ---------------------------------------------------------------------------

    def action_mark(self) -> None:
        run = self._cursor_run()
        if run is None:
            return
        folder = run.folder
        if folder == self.given_b:
            self.notify("this run is B, given on the command line", timeout=3)
            return
        if folder in self.marks:
            self.marks.remove(folder)
        else:
            self.marks.append(folder)
            room = 1 if self.given_b is not None else 2
            del self.marks[:-room]
        self._relabel()
        self.query_one(DataTable).action_cursor_down()

    def action_compare(self) -> None:
        run = self._cursor_run()
        cursor = None if run is None else run.folder
        pair: tuple[Path | None, Path | None]
        if self.given_b is not None:
            pair = (self.marks[0] if self.marks else cursor, self.given_b)
        elif len(self.marks) == 2:
            pair = (self.marks[0], self.marks[1])
        elif self.marks:
            pair = (self.marks[0], cursor)
        else:
            self.notify("mark run A with space, then press enter on run B", timeout=4)
            return
        a, b = pair
        if a is None or b is None or a == b:
            self.notify("pick two different runs: A and B", timeout=4)
            return
        self.open_comparison(a, b)

    def open_comparison(self, a: Path, b: Path) -> None:
        """Compare run folder `a` to `b` on the compare screen; what makes them incomparable
        is said, and the list stays."""
        try:
            comparison = compare_folders(a, b, threshold=self.threshold)
        except CompareInputError as exc:
            self.notify(multi_line(str(exc)), severity="error", markup=False, timeout=8)
            return
        self.compared = comparison
        self.app.push_screen(CompareScreen(comparison, back=True))
