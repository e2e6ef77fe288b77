"""`h`: the distributions of the rollouts the table shows (its filters apply): each phase's
duration, the total, model-call latency, tokens per rollout and reward, with their least
value, p50, p95, p99 and greatest in a table and one of them as a histogram under it.

← → pick the metric, ↑ ↓ a bin, enter shows the table exactly that bin's rollouts (the
app keeps it as a filter until Esc), escape goes back without one. The numbers are
`core.eval.timing.distributions`'; the view redraws once a second, so a live run's move on
(and a replay's as it plays).
"""

from __future__ import annotations

from collections.abc import Callable

from rich import box
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from core.eval.timing.distributions import (
    METRICS,
    Distribution,
    bin_label,
    distribution_of,
    samples_of,
    value_text,
)
from core.rollout_record import RolloutRecord
from tui.widgets.histogram import Histogram
from tui.widgets.table.view import RolloutPick

REFRESH_SEC = 1.0


class DistributionsScreen(ModalScreen[RolloutPick | None]):
    """Histograms of the shown rollouts; dismissed with the bin picked, or None."""

    DEFAULT_CSS = """
    DistributionsScreen {
        background: $background;
    }
    DistributionsScreen #distributions-title {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    DistributionsScreen #distributions-table {
        height: auto;
        padding: 0 1;
    }
    DistributionsScreen #distributions-bin {
        height: 1;
        padding: 0 1;
        color: $text-muted;
    }
    DistributionsScreen Histogram {
        padding: 0 1;
    }
    """
    BINDINGS = [
        Binding("escape,h,q", "close", "Back", tooltip="Back to the table", id="dist.close"),
        Binding("left", "metric(-1)", "Metric", tooltip="The metric before", id="dist.previous"),
        Binding("right", "metric(1)", "Next", tooltip="The metric after", id="dist.next"),
        Binding("up,k", "bin(-1)", "Bin up", tooltip="The bin above", show=False, id="dist.up"),
        Binding(
            "down,j", "bin(1)", "Bin down", tooltip="The bin below", show=False, id="dist.down"
        ),
        Binding(
            "enter",
            "pick",
            "Show its rollouts",
            tooltip="Filter the table to this bin's rollouts (esc there clears it)",
            id="dist.pick",
        ),
    ]

    def __init__(self, shown: Callable[[], list[RolloutRecord]], *, filters: str = "") -> None:
        """`shown`: the rollouts the table shows now, asked at every redraw; `filters`: the
        table's filters, as the status line names them."""
        super().__init__()
        self.shown = shown
        self.filters = filters
        self.metric_index = 0
        # Kept, not queried: the timer may still fire while the screen goes away.
        self._title = Static(id="distributions-title")
        self._table = Static(id="distributions-table")
        self._bin = Static(id="distributions-bin")
        self.histogram = Histogram(id="distributions-histogram")
        #: The rollouts drawn at the latest redraw.
        self.records: list[RolloutRecord] = []

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._table
        yield self._bin
        yield self.histogram
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.histogram.focus()
        self.refresh_view()
        self.set_interval(REFRESH_SEC, self.refresh_view)

    def refresh_view(self) -> None:
        records = self.records = self.shown()
        title = Text.assemble(("distributions ", "bold"), f"of the {len(records)} rollouts shown")
        if self.filters:
            title.append(f"  (filter: {self.filters})", "dim")
        title.no_wrap, title.overflow = True, "ellipsis"
        self._title.update(title)
        # Each metric's values once per redraw: the table's numbers come from them (no bins:
        # percentiles are the values'), and the histogram bins the chosen one's.
        samples = [samples_of(metric, records) for metric in METRICS]
        pairs = zip(METRICS, samples, strict=True)
        summaries = [distribution_of(metric, found, 0) for metric, found in pairs]
        self._table.update(self._summary(summaries))
        self.histogram.show(METRICS[self.metric_index], samples[self.metric_index])

    def _summary(self, shown: list[Distribution]) -> Table:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
        table.add_column("metric", no_wrap=True)
        for name in ("n", "min", "p50", "p95", "p99", "max"):
            table.add_column(name, justify="right", no_wrap=True)
        for index, found in enumerate(shown):
            metric = found.metric
            values = dict(found.percentiles)
            cells = [value_text(metric, values[q]) if q in values else "-" for q in (50, 95, 99)]
            low = "-" if found.low is None else value_text(metric, found.low)
            high = "-" if found.high is None else value_text(metric, found.high)
            style = "reverse" if index == self.metric_index else ""
            table.add_row(metric.title, str(found.count), low, *cells, high, style=style)
        return table

    def _show_bin(self) -> None:
        histogram = self.histogram
        found, metric = histogram.selected, histogram.metric
        if found is None or metric is None:
            self._bin.update(Text(f"{METRICS[self.metric_index].title}: no values", "dim"))
            return
        rollouts = len(found.rollout_ids)
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{metric.title} ", "bold")
        line.append(f"bin {bin_label(metric, found)}: {found.count} values, ")
        line.append(f"{rollouts} rollout" + ("s" if rollouts != 1 else ""))
        if rollouts:
            line.append("  (enter: show them)")
        self._bin.update(line)

    @on(Histogram.Changed)
    def _moved(self) -> None:
        self._show_bin()

    def action_metric(self, step: int) -> None:
        self.metric_index = (self.metric_index + step) % len(METRICS)
        self.histogram.cursor = 0
        self.refresh_view()

    def action_bin(self, step: int) -> None:
        self.histogram.move(step)

    def action_pick(self) -> None:
        found, metric = self.histogram.selected, self.histogram.metric
        if found is None or metric is None or not found.rollout_ids:
            self.notify("no rollouts in this bin", severity="warning")
            return
        self.dismiss(RolloutPick(f"{metric.key} {bin_label(metric, found)}", found.rollout_ids))

    def action_close(self) -> None:
        self.dismiss(None)
