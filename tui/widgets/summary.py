"""The header line and the summary strip: servers, status chips, progress, rewards, failures."""

from __future__ import annotations

from collections import Counter, deque

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from core.board import RolloutBoard
from core.eval.results.metrics import Progress
from core.rollout_record import NOT_ADMITTED
from tui.sources.base import ServerView
from tui.widgets.format import CHIP_STATUSES, STATUS_STYLES, compact_count, duration, money, plain

# A chip per status, then the board's own counts of stuck and untracked rollouts (and one for
# rollouts never admitted, when there are some).
CHIPS = (*CHIP_STATUSES, "stuck", "untracked")
SERVER_DOTS = {"accepting": ("●", "green"), "draining": ("●", "yellow"), "down": ("●", "red")}
#: A server nobody watches any more (the run is over) has a hollow dot: its last state's
#: colour, or none for one the run stopped itself.
UNWATCHED_DOT = "○"
SPARK = "▁▂▃▄▅▆▇█"
#: The sparkline's bar: work items finished per this many seconds of the app's clock.
THROUGHPUT_WINDOW_SEC = 5.0
#: The ETA's rate: items finished over the last this many windows (a minute).
RATE_WINDOWS = 12


def sparkline(values: list[int]) -> str:
    if not values:
        return ""
    top = max(values) or 1
    return "".join(SPARK[min(len(SPARK) - 1, value * (len(SPARK) - 1) // top)] for value in values)


class RunHeader(Static):
    """Run name, model, each server with a health dot, elapsed time."""

    DEFAULT_CSS = """
    RunHeader {
        height: 1;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    """

    def show(self, title: str, subtitle: str, servers: list[ServerView], elapsed: float) -> None:
        # Server health and elapsed time keep their place on the right; the run's name and
        # description give way (ellipsis) when the terminal is narrow.
        left = Text(no_wrap=True, overflow="ellipsis")
        left.append("osmosis-tui ", "bold")
        left.append_text(plain(title, "bold"))
        left.append("  ")
        left.append_text(plain(subtitle, "dim"))
        right = Text("  ", no_wrap=True, overflow="ellipsis", justify="right")
        for server in servers:
            dot, style = SERVER_DOTS.get(server.state, (UNWATCHED_DOT, "dim"))
            right.append(dot if server.watched else UNWATCHED_DOT, style)
            right.append(" ")
            right.append_text(plain(server.url.removeprefix("http://")))
            if server.state != "accepting":
                right.append(f" {server.state}", style)
            if server.restarts:
                right.append(f" restarted×{server.restarts}", "yellow")
            right.append("  ")
        right.append(duration(elapsed), "dim")
        line = Table.grid(expand=True)
        line.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        line.add_column(no_wrap=True, justify="right")
        line.add_row(left, right)
        self.update(line)


class SummaryStrip(Static):
    """Chips per status (and for the work items not dispatched yet), progress with pass rate
    and ETA, mean reward, tokens (per second, and their cost when known), throughput,
    failures."""

    DEFAULT_CSS = """
    SummaryStrip {
        height: 3;
        padding: 0 1;
        background: $boost;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._per_window: deque[int] = deque(maxlen=30)
        self._last_done: int | None = None

    def sample_throughput(self, done: int) -> None:
        """Called every `THROUGHPUT_WINDOW_SEC`; keeps finished-per-window for the sparkline."""
        if self._last_done is not None:
            self._per_window.append(max(done - self._last_done, 0))
        self._last_done = done

    def restart_throughput(self) -> None:
        """Forget the samples: the run's time went back (a replay's seek)."""
        self._per_window.clear()
        self._last_done = None

    def items_per_sec(self) -> float | None:
        """Work items finished a second over the last minute; None before a full window, or
        when none finished in it (the rate is then unknown, not zero)."""
        recent = list(self._per_window)[-RATE_WINDOWS:]
        finished = sum(recent)
        return finished / (len(recent) * THROUGHPUT_WINDOW_SEC) if finished else None

    def show(
        self,
        board: RolloutBoard,
        counts: Counter[str],
        progress: Progress,
        elapsed: float,
        *,
        ended: bool = False,
        manual: int = 0,
    ) -> None:
        """`ended`: the work is over; what is left waits for a resume, and has no ETA.
        `manual`: rollouts sent by hand, on the board but outside the progress."""
        chips = Text(no_wrap=True, overflow="ellipsis")
        # First: what the table cannot show, as no rollout exists for it yet.
        waiting = progress.not_dispatched
        chips.append("not dispatched ", "bold" if waiting else "dim")
        chips.append(f"{waiting}", "bold" if waiting else "dim")
        chips.append("  ")
        for name in CHIPS:
            count = counts.get(name, 0)
            style = STATUS_STYLES.get(name, "yellow") if count else "dim"
            chips.append(f"{name} ", style)
            chips.append(f"{count}", f"bold {style}" if count else "dim")
            chips.append("  ")
        if counts.get(NOT_ADMITTED):
            chips.append(f"not admitted {counts[NOT_ADMITTED]}", "bold red")

        bar = Text(no_wrap=True, overflow="ellipsis")
        total = max(progress.total, 1)
        width = 24
        filled = min(width, progress.done * width // total)
        bar.append("█" * filled, "green")
        bar.append("░" * (width - filled), "dim")
        bar.append(f" {progress.done}/{progress.total}")
        if manual:
            bar.append(f" +{manual} manual", "dim")
        if progress.pass_rate is not None:
            bar.append(f"  pass {progress.pass_rate * 100:.1f}%", "bold")
        if not ended and progress.left:
            bar.append_text(self._eta(progress))
        mean = progress.mean_reward
        bar.append(f"  mean reward {'-' if mean is None else f'{mean:.3f}'}")
        spark = sparkline(list(self._per_window))
        if spark:
            bar.append(f"  done/{THROUGHPUT_WINDOW_SEC:g}s ", "dim")
            bar.append(spark, "cyan")

        failures = board.failures_by_category()
        failed = Text(no_wrap=True, overflow="ellipsis")
        failed.append("failures ", "dim")
        if not failures:
            failed.append("none", "dim")
        for category, count in failures.most_common():
            failed.append(f"{category} {count}  ", "red")
        # The model's totals keep their place on the right; the failures give way.
        last = Table.grid(expand=True)
        last.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        last.add_column(no_wrap=True, justify="right")
        last.add_row(failed, _model_totals(board, elapsed))
        # One line each, never wrapped (see the CSS): a wrapped line would push the next out.
        self.update(Group(chips, bar, last))

    def _eta(self, progress: Progress) -> Text:
        """`ETA 2m05s`; a lower bound with overdue work (`ETA ≥2m05s, 3 running long (1
        stuck)`); `ETA —` when it cannot be told; and when all in flight is stuck, that, in
        red."""
        eta = Text()
        stuck = progress.stuck
        if progress.stalled:
            if progress.not_dispatched:
                said = f"every slot held by a stuck rollout ({stuck})"
            else:
                said = f"only {stuck} stuck rollout{'s' if stuck > 1 else ''} left"
            eta.append(f"  ETA — {said}", "bold red")
            return eta
        seconds = progress.eta_sec(self.items_per_sec())
        overdue = max(progress.overdue, stuck)
        if seconds is None:
            eta.append("  ETA —", "dim")
        else:
            eta.append(f"  ETA {'≥' if overdue else ''}{duration(seconds)}", "dim")
        if overdue > stuck:
            eta.append(f", {overdue} running long", "yellow")
            if stuck:
                eta.append(f" ({stuck} stuck)", "yellow")
        elif stuck:
            eta.append(f", {stuck} stuck", "yellow")
        return eta


def _model_totals(board: RolloutBoard, elapsed: float) -> Text:
    """Tokens over every model call so far, per second of the run, and their cost when known."""
    totals = Text(no_wrap=True)
    if not board.model_calls:
        return totals
    tokens = board.total_tokens
    totals.append("tokens ", "dim")
    totals.append(compact_count(tokens))
    if elapsed > 0:
        totals.append(f" ({compact_count(round(tokens / elapsed))}/s)", "dim")
    if board.total_cost_usd is not None:
        totals.append(f"  {money(board.total_cost_usd)}")
    return totals
