"""The header line and the summary strip: servers, status chips, progress, rewards, failures."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from functools import partial

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from core.board import RolloutBoard
from core.eval.compare.baseline import BaselineCounts
from core.eval.cost.spend import Spend
from core.eval.count_text import compact_count
from core.eval.dispatch_gate import DispatchState
from core.eval.duration_text import duration
from core.eval.results.metrics import Progress
from core.rollout_record import NOT_ADMITTED
from core.types import RolloutStatus
from tui.sources.base import ServerView
from tui.widgets.format import CHIP_STATUSES, STATUS_STYLES, money, one_line, plain

# A chip per status, then the board's own counts of stuck and untracked rollouts (and one for
# rollouts never admitted, when there are some).
CHIPS = (*CHIP_STATUSES, "stuck", "untracked")
SERVER_DOTS = {
    "accepting": ("●", "green"),
    "drained": ("●", "yellow"),
    "draining": ("●", "yellow"),
    "down": ("●", "red"),
}
#: A server nobody watches any more (the run is over) has a hollow dot: its last state's
#: colour, or none for one the run stopped itself.
UNWATCHED_DOT = "○"
#: The start-up step in progress (uv sync, the server's start), before any server is up.
STARTING_DOT = "◌"
#: The most of the step's latest output line the header shows: the run's name keeps room.
STARTING_DETAIL_CELLS = 60
SPARK = "▁▂▃▄▅▆▇█"
#: The sparkline's bar: work items finished per this many seconds of the app's clock.
THROUGHPUT_WINDOW_SEC = 5.0
#: The ETA's rate: items finished over the last this many windows (a minute).
RATE_WINDOWS = 12
# The fewest throughput samples worth a sparkline: with less room it is left out.
SPARK_LEAST = 5
# The progress bar's cells, and the fewest it shrinks to in a narrow terminal.
BAR_WIDTH = 24
BAR_LEAST = 8
#: The room the failures line keeps beside the baseline's counts before these say less.
FAILURES_LEAST = 24


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

    _texts: tuple[Text, Text] | None = None

    def show(self, title: str, subtitle: str, servers: list[ServerView], elapsed: float) -> None:
        # Server health and elapsed time keep their place on the right; the run's name and
        # description give way (ellipsis) when the terminal is narrow.
        left = Text(no_wrap=True, overflow="ellipsis")
        left.append("osmosis-tui ", "bold")
        left.append_text(plain(title, "bold"))
        left.append("  ")
        for server in servers:
            if server.state == "starting":
                # Before any server is up: what the start-up does, and its latest output,
                # before the description, which gives way to it in a narrow terminal.
                left.append(f"{STARTING_DOT} ", "yellow")
                left.append_text(plain(server.url))
                if server.detail:
                    left.append(": ", "dim")
                    left.append_text(plain(server.detail[:STARTING_DETAIL_CELLS], "dim"))
                left.append("  ")
        left.append_text(plain(subtitle, "dim"))
        right = Text("  ", no_wrap=True, overflow="ellipsis", justify="right")
        for server in servers:
            if server.state == "starting":
                continue  # said on the left
            dot, style = SERVER_DOTS.get(server.state, (UNWATCHED_DOT, "dim"))
            right.append(dot if server.watched else UNWATCHED_DOT, style)
            right.append(" ")
            right.append_text(plain(server.url.removeprefix("http://")))
            if server.state != "accepting":
                right.append(f" {one_line(server.state)}", style)  # an attached run's word
            if server.restarts:
                right.append(f" restarted×{server.restarts}", "yellow")
            right.append("  ")
        right.append(duration(elapsed), "dim")
        # Asked at every repaint; what it says changes once a second at most, and rendering
        # the line again costs more than making it.
        if (left, right) == self._texts:
            return
        self._texts = (left, right)
        line = Table.grid(expand=True)
        line.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        line.add_column(no_wrap=True, justify="right")
        line.add_row(left, right)
        self.update(line, layout=False)  # one line always (CSS): no layout pass per update


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
        #: `show` with what it was last given, to show again when the width changes.
        self._shown: Callable[[], None] | None = None

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

    def quiet_sec(self) -> float:
        """How long, in whole windows, since the last window in which an item finished (or
        since the first sample, when none did)."""
        quiet = 0
        for finished in reversed(self._per_window):
            if finished:
                break
            quiet += 1
        return quiet * THROUGHPUT_WINDOW_SEC

    def stalled(self) -> bool:
        """Items finished in this session, then none over the whole rate window (a minute):
        the rate is gone, and the strip says so rather than keep a time it foresaw."""
        return any(self._per_window) and self.quiet_sec() >= RATE_WINDOWS * THROUGHPUT_WINDOW_SEC

    def on_resize(self) -> None:
        if self._shown is not None:
            self._shown()  # what fits has changed

    def show(
        self,
        board: RolloutBoard,
        counts: Counter[str],
        progress: Progress,
        elapsed: float,
        *,
        ended: bool = False,
        manual: int = 0,
        dispatch_paused: bool = False,
        versus: BaselineCounts | None = None,
        watch: bool = False,
        spend: Spend | None = None,
        tail: DispatchState | None = None,
    ) -> None:
        """`tail`: the hedges and rule requeues of the run's dispatch, when it has any.
        `ended`: the work is over; what is left waits for a resume, and has no ETA.
        `manual`: rollouts sent by hand, on the board but outside the progress.
        `dispatch_paused`: no work item is sent until the user resumes the run.
        `versus`: with a baseline, the finished items counted against it.
        `watch`: a watch's rollouts, no work items and without results: nothing is said of
        dispatch or of rewards.
        `spend`: what the model cost so far, per minute, projected to the end, and the
        budget (without it, the board's sum alone)."""
        self._shown = partial(
            self.show,
            board,
            counts,
            progress,
            elapsed,
            ended=ended,
            manual=manual,
            dispatch_paused=dispatch_paused,
            versus=versus,
            watch=watch,
            spend=spend,
            tail=tail,
        )
        # 0 before the first layout: everything, as if there were room.
        room = self.content_size.width or None
        # Where they do not all fit, the counts of 0 give way, then the rollouts never
        # admitted (the failures line counts them too); the first that fits, else the least.
        variants = [
            _chips(
                counts,
                progress,
                with_zeros=with_zeros,
                not_admitted=not_admitted,
                work_items=not watch,
            )
            for with_zeros, not_admitted in ((True, True), (False, True), (False, False))
        ]
        variants = [chips for chips in variants if chips.plain] or variants[:1]
        chips = next((c for c in variants if room is None or c.cell_len <= room), variants[-1])

        counted = Text(no_wrap=True, overflow="ellipsis")
        counted.append(f" {progress.done}/{progress.total}")
        if manual:
            counted.append(f" +{manual} manual", "dim")
        if tail is not None and tail.hedges_sent:
            counted.append(f" hedged {tail.hedges_sent} ({tail.hedges_won} won)", "dim")
        if tail is not None and tail.requeued_by_rule:
            counted.append(f" {tail.requeued_by_rule} requeued stuck", "dim")
        if progress.pass_rate is not None:
            counted.append(f"  pass {progress.pass_rate * 100:.1f}%", "bold")
        if not ended and progress.left:
            counted.append_text(self._eta(progress, dispatch_paused=dispatch_paused, spend=spend))
        mean = progress.mean_reward
        if watch:
            counted.append(" ended", "dim")
        else:
            counted.append(f"  mean reward {'-' if mean is None else f'{mean:.3f}'}")
        # The bar gives way to the numbers (down to BAR_LEAST), the sparkline to both: it
        # shows the latest samples that fit, on the scale of them all, or none.
        width = BAR_WIDTH if room is None else min(BAR_WIDTH, room - counted.cell_len)
        width = max(width, BAR_LEAST)
        total = max(progress.total, 1)
        filled = min(width, progress.done * width // total)
        bar = Text(no_wrap=True, overflow="ellipsis")
        bar.append("█" * filled, "green")
        bar.append("░" * (width - filled), "dim")
        bar.append_text(counted)
        label = f"  done/{THROUGHPUT_WINDOW_SEC:g}s "
        spark = sparkline(list(self._per_window))
        if room is not None:
            fit = room - bar.cell_len - len(label)
            spark = spark[-fit:] if fit >= SPARK_LEAST else ""
        if spark:
            bar.append(label, "dim")
            bar.append(spark, "cyan")

        # The run's failures: this session's (on the board) and those carried over.
        failures = board.failures_by_category() + Counter(progress.carried_failures)
        failed = Text(no_wrap=True, overflow="ellipsis")
        failed.append("failures ", "dim")
        if not failures:
            failed.append("none", "dim")
        for category, count in failures.most_common():
            failed.append(f"{category} {count}  ", "red")
        # The baseline's counts and the model's totals keep their place on the right; the
        # failures give way, and where they would have too little room the counts say less.
        totals = _per_run(board, elapsed) if watch else _model_totals(board, elapsed, spend)
        right = Text(no_wrap=True)
        if versus is not None:
            right = _versus(versus, short=False)
            if room is not None and right.cell_len + totals.cell_len + 2 > room - FAILURES_LEAST:
                right = _versus(versus, short=True)
            if totals:
                right.append("  ")
        right.append_text(totals)
        last = Table.grid(expand=True)
        last.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        last.add_column(no_wrap=True, justify="right")
        last.add_row(failed, right)
        # One line each, never wrapped (see the CSS): a wrapped line would push the next out.
        self.update(Group(chips, bar, last), layout=False)  # three lines always (CSS)

    def _eta(self, progress: Progress, *, dispatch_paused: bool, spend: Spend | None) -> Text:
        """`ETA 2m05s`; a lower bound with overdue work (`ETA ≥2m05s, 3 running long (1
        stuck)`); `ETA —` when it cannot be told (nothing finished in this session yet); when
        all in flight is stuck, that, in red; while the run is paused with work waiting, that
        (not a time growing with the pause); when nothing finished for a minute, that (not the
        last time foreseen)."""
        eta = Text()
        stuck = progress.stuck
        if dispatch_paused and progress.not_dispatched:
            if spend is not None and spend.state == "paused":
                # Short: at 80 columns the mean reward still fits beside it.
                eta.append("  ETA — over budget, paused", "bold yellow")
                eta.append(" (P/$)", "yellow")
                return eta
            eta.append("  ETA — run paused (P resumes)", "bold yellow")
            return eta
        if progress.stalled:
            if progress.not_dispatched:
                said = f"every slot held by a stuck rollout ({stuck})"
            else:
                said = f"only {stuck} stuck rollout{'s' if stuck > 1 else ''} left"
            eta.append(f"  ETA — {said}", "bold red")
            return eta
        seconds = progress.eta_sec(self.items_per_sec())
        overdue = max(progress.overdue, stuck)
        if self.stalled():
            eta.append(f"  ETA — nothing finished for {duration(self.quiet_sec())}", "yellow")
        elif seconds is None:
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


def _chips(
    counts: Counter[str],
    progress: Progress,
    *,
    with_zeros: bool,
    not_admitted: bool,
    work_items: bool = True,
) -> Text:
    """The run's count per status: a resume's results carried over are on no board of this
    session, so they are added to the board's, which the status filters show; the board's
    share is then said (`success 222 (130 now)`), the rows a filter on the status shows.
    Without `work_items` (a watch's rollouts), nothing is said of dispatch."""
    chips = Text(no_wrap=True, overflow="ellipsis")
    not_dispatched = progress.not_dispatched
    carried: dict[str, int] = {
        RolloutStatus.SUCCESS: progress.carried_success,
        RolloutStatus.FAILURE: progress.carried_failed,
    }
    # First: what the table cannot show, as no rollout exists for it yet.
    if work_items and (not_dispatched or with_zeros):
        style = "bold" if not_dispatched else "dim"
        chips.append("not dispatched ", style)
        chips.append(f"{not_dispatched}", style)
        chips.append("  ")
    for name in CHIPS:
        now = counts.get(name, 0)
        before = carried.get(name, 0)
        count = now + before
        if not count and not with_zeros:
            continue
        style = STATUS_STYLES.get(name, "yellow") if count else "dim"
        chips.append(f"{name} ", style)
        chips.append(f"{count}", f"bold {style}" if count else "dim")
        if before:
            chips.append(f" ({now} now)", "dim")
        chips.append("  ")
    if not_admitted and counts.get(NOT_ADMITTED):
        chips.append(f"not admitted {counts[NOT_ADMITTED]}", "bold red")
    return chips


def _versus(counts: BaselineCounts, *, short: bool) -> Text:
    """The counts against the baseline, `vs baseline: +3 improved, −2 regressed, 41 compared`
    (`BaselineCounts.said`, coloured), or `short`: `vs base +3 −2 of 41`."""
    said = Text(no_wrap=True)
    improved, regressed = counts.improved, counts.regressed
    said.append("vs base " if short else "vs baseline: ", "dim")
    said.append(f"+{improved}", "bold green" if improved else "dim")
    if not short:
        said.append(" improved", "green" if improved else "dim")
    said.append(", " if not short else " ", "dim")
    said.append(f"−{regressed}", "bold red" if regressed else "dim")
    if not short:
        said.append(" regressed", "red" if regressed else "dim")
    said.append(f", {counts.compared} compared" if not short else f" of {counts.compared}", "dim")
    return said


#: A watch's throughput per run counts the rollouts that ended within this much of now.
PER_RUN_WINDOW_SEC = 60.0
#: The runs a watch's strip names (the busiest first); the rest are counted as "+N runs".
PER_RUN_SHOWN = 3


def _per_run(board: RolloutBoard, elapsed: float) -> Text:
    """A watch's throughput per group: for the busiest runs (as the events name them), how
    many of their rollouts ended in the last minute ("ended/min grpo-step-120 42 · nightly
    7"); nothing while none ended lately."""
    now = board.started_at + elapsed
    ended: Counter[str] = Counter()
    for record in board:
        at = record.terminal_at
        if at is not None and now - at <= PER_RUN_WINDOW_SEC and record.reported_by is not None:
            ended[record.reported_by.run or "-"] += 1
    text = Text(no_wrap=True)
    if not ended:
        return text
    text.append(f"ended/{PER_RUN_WINDOW_SEC / 60:g}min ", "dim")
    busiest = ended.most_common()
    text.append(" · ".join(f"{one_line(run)} {count}" for run, count in busiest[:PER_RUN_SHOWN]))
    if len(busiest) > PER_RUN_SHOWN:
        text.append(f" +{len(busiest) - PER_RUN_SHOWN} runs", "dim")
    return text


def _model_totals(board: RolloutBoard, elapsed: float, spend: Spend | None) -> Text:
    """Tokens over every model call so far (a replay of a run that recorded no call: what
    its results say), per second of the run, and their cost when known: spent, per minute,
    the projected total, and the budget (`of $10.00`) with what it did."""
    totals = Text(no_wrap=True)
    if not board.model_calls and not board.total_tokens:
        return totals
    tokens = board.total_tokens
    totals.append("tokens ", "dim")
    totals.append(compact_count(tokens))
    if elapsed > 0:
        totals.append(f" ({compact_count(round(tokens / elapsed))}/s)", "dim")
    if spend is None or spend.spent_usd is None:
        if board.total_cost_usd is not None:
            totals.append(f"  {money(board.total_cost_usd)}")
        return totals
    totals.append(f"  {money(spend.spent_usd)}")
    per_minute = spend.per_minute(elapsed)
    if per_minute is not None:
        totals.append(f" ({money(per_minute)}/min)", "dim")
    if spend.projected_usd is not None:
        totals.append("  projected ", "dim")
        totals.append(money(spend.projected_usd))
    if spend.budget_usd is not None:
        over = spend.projected_usd is not None and spend.projected_usd > spend.budget_usd
        totals.append(f" of {money(spend.budget_usd)}", "yellow" if over else "dim")
        if spend.state == "reached":
            totals.append(" reached", "bold red")
    return totals
