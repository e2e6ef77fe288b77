"""`d`: one rollout over the whole screen, in tabs: its details, every model call, its
transcript, its result as raw JSON, and its waterfall (where its time went); `escape` goes
back (DESIGN.md §2, the full view).

The details are the details pane's (widgets/details.py) and the transcript the transcript
screen's panel (widgets/transcript_panel.py), so both say the same things; the view redraws
once a second, while the dashboard's keys wait behind it (the screen is modal).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, TabbedContent, TabPane

from core.board import RolloutBoard
from core.eval.results.diagnostics import TrialDiagnostics, diagnostics_path, read_diagnostics
from core.eval.safe_text import replace_unsafe
from core.eval.timing.waterfall import waterfall
from core.rollout_record import RolloutRecord
from core.types import RolloutResultResponse
from tui.sources.base import DashboardSource
from tui.widgets.details import describe
from tui.widgets.format import plain, status_text
from tui.widgets.model_calls import model_call_list
from tui.widgets.transcript_panel import TranscriptPanel
from tui.widgets.waterfall import WaterfallChart

REFRESH_SEC = 1.0
TRANSCRIPT_TAB = "view-transcript"
#: The tabs, in order: (pane id, title); key 1 opens the first.
TABS = (
    ("view-details", "Details"),
    ("view-calls", "Model calls"),
    (TRANSCRIPT_TAB, "Transcript"),
    ("view-result", "Result JSON"),
    ("view-waterfall", "Waterfall"),
)
NO_RESULT = "no result yet: the server has not answered with this rollout's result"


def result_json(result: RolloutResultResponse | None, redact: Callable[[str], str] | None) -> Text:
    """The result as the server sent it, as indented JSON: redacted, every line made safe
    for the terminal (JSON escapes control characters, not bidi overrides), never markup."""
    if result is None:
        return Text(NO_RESULT, "dim")
    # The client keeps a copy of the messages as `trajectory_messages`; no server sends it.
    document = result.model_dump_json(indent=2, exclude={"sample": {"trajectory_messages"}})
    if redact is not None:
        document = redact(document)
    return Text("\n".join(replace_unsafe(line) for line in document.splitlines()))


class RolloutViewScreen(ModalScreen[None]):
    """Everything about one rollout, full screen."""

    DEFAULT_CSS = """
    RolloutViewScreen {
        background: $background;
    }
    RolloutViewScreen #rollout-view-title {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    RolloutViewScreen TabbedContent {
        height: 1fr;
    }
    RolloutViewScreen ContentSwitcher {
        height: 1fr;
    }
    RolloutViewScreen TabPane {
        height: 1fr;
        padding: 0;
    }
    RolloutViewScreen TabPane > VerticalScroll {
        height: 1fr;
        padding: 0 1;
        scrollbar-size-vertical: 1;
    }
    """
    BINDINGS = [
        Binding(
            "escape,d,q", "close", "Back", tooltip="Back to the dashboard", id="rollout-view.close"
        ),
        *(
            Binding(
                str(number),
                f"show_tab('{pane}')",
                title,
                tooltip=f"The {title.lower()} tab",
                id=f"rollout-view.{pane.removeprefix('view-')}",
            )
            for number, (pane, title) in enumerate(TABS, start=1)
        ),
    ]

    def __init__(
        self,
        source: DashboardSource,
        record: RolloutRecord,
        board: RolloutBoard,
        *,
        now: Callable[[], float],
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """`now` is the dashboard's time (it stops when the run ends); `wall_clock` tells the
        transcript preview's age."""
        super().__init__()
        self.source = source
        self.record = record
        self.board = board
        self.now = now
        self.wall_clock = wall_clock
        self._json_of: tuple[RolloutResultResponse | None] | None = None
        #: The diagnostics the server left for the finished rollout, read once it finished.
        self._diagnostics: tuple[TrialDiagnostics | None] | None = None
        # Kept, not queried: the timer may still fire while the screen goes away.
        self._title_bar = Static(id="rollout-view-title")
        self._bodies = {
            pane: Static(id=f"{pane}-body") for pane, _ in TABS if pane != TRANSCRIPT_TAB
        }

    def compose(self) -> ComposeResult:
        yield self._title_bar
        with TabbedContent(initial=TABS[0][0]):
            for pane, title in TABS:
                with TabPane(title, id=pane):
                    if pane == TRANSCRIPT_TAB:
                        yield TranscriptPanel(self.source, self.record, wall_clock=self.wall_clock)
                    else:
                        with VerticalScroll():
                            yield self._bodies[pane]
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.refresh_view()
        self.set_interval(REFRESH_SEC, self.refresh_view)

    def refresh_view(self) -> None:
        """Redraw what moves: the title, the details, the calls; the JSON when the result
        is another."""
        record, now = self.record, self.now()
        bodies = self._bodies
        self._title_bar.update(self._title())
        bodies["view-details"].update(describe(record, self.board, now))
        bodies["view-calls"].update(model_call_list(record.model, self.board.started_at, now))
        bodies["view-waterfall"].update(
            WaterfallChart(waterfall(record, now, self._trial_diagnostics()))
        )
        result = record.latest_result
        # Compared by value: a finished rollout's result is parsed anew for each reader.
        if self._json_of is None or self._json_of[0] != result:
            self._json_of = (result,)
            bodies["view-result"].update(result_json(result, record.redact))

    def _trial_diagnostics(self) -> TrialDiagnostics | None:
        """What the server left in `diagnostics.json` for this rollout: read once it has
        finished (the server writes the file before it publishes the result)."""
        if self._diagnostics is None:
            root = self.source.trials_root
            if root is None or not self.record.finished:
                return None
            self._diagnostics = (read_diagnostics(diagnostics_path(root, self.record.rollout_id)),)
        return self._diagnostics[0]

    def _title(self) -> RenderableType:
        record = self.record
        title = Text.assemble(("rollout ", "bold"), plain(record.rollout_id, "bold"), "  ")
        title.append_text(status_text(record.display_status))
        if record.reported_by is not None:  # a watch's: no row nor try, its caller's run
            title.append("  run ")
            title.append_text(plain(record.reported_by.run or "-"))
            title.append("  ")
        else:
            row = "-" if record.source_row_index is None else str(record.source_row_index)
            attempt = "-" if record.run_index is None else str(record.run_index)
            title.append(f"  row {row} / try {attempt}  ")
        title.append_text(plain(record.server or "-", "dim"))
        title.no_wrap, title.overflow = True, "ellipsis"
        return title

    def action_show_tab(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane

    def action_close(self) -> None:
        self.dismiss(None)
