"""The dashboard: a live table of every rollout moving through its phases (DESIGN.md §2).

The app reads the board's change batches on a timer (never per event, never over HTTP) and
repaints only what changed. Actions go back through the source: cancel on the server, stop
tracking locally, submit, re-run. Errors become toasts, row flags and event-log lines; they
never end the app.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from core.board import RolloutRecord
from tui.replay import ReplaySource
from tui.screens.dialogs import ConfirmScreen, HelpScreen, NewRolloutScreen, QuitScreen
from tui.source import DashboardSource, NewRollout
from tui.widgets.details import DetailsPane
from tui.widgets.event_log import EventLog
from tui.widgets.phase_track import LEGEND
from tui.widgets.rollout_table import COLUMNS, SORTS, RolloutTable, _cell
from tui.widgets.summary import RunHeader, SummaryStrip

Clock = Callable[[], float]

REPAINT_HZ = 3.0
STATUS_KEYS = {
    "1": "queued",
    "2": "running",
    "3": "grading",
    "4": "success",
    "5": "failure",
    "6": "cancelled",
}


def _binding(key: str, action: str, description: str, tooltip: str, **options: object) -> Binding:
    return Binding(key, action, description, tooltip=tooltip, id=action.split("(", 1)[0], **options)  # type: ignore[arg-type]


class DashboardApp(App[None]):
    """Watches a `DashboardSource` (a live eval, or a replay)."""

    CSS_PATH = "dashboard.tcss"
    TITLE = "osmosis-tui"
    BINDINGS = [
        _binding("enter", "details", "Details", "Show everything about the selected rollout"),
        _binding("c", "cancel_server", "Cancel", "Cancel the selected rollout on its server"),
        _binding("x", "untrack", "Untrack", "Stop tracking locally; nothing is sent to the server"),
        _binding("space", "mark", "Mark", "Mark or unmark the selected rollout"),
        _binding(
            "C",
            "cancel_marked",
            "Cancel marked",
            "Cancel marked rollouts (or all shown) on the server",
        ),
        _binding("n", "new_rollout", "New", "Submit a new rollout by hand"),
        _binding("r", "rerun", "Re-run", "Run the selected finished rollout again, with a new id"),
        _binding("slash", "filter", "Filter", "Filter by text: id, row, status, error, label"),
        _binding("exclamation_mark", "stuck_only", "Stuck", "Show only stuck rollouts"),
        *(
            _binding(
                key,
                f"status_filter('{status}')",
                status.title(),
                f"Show or hide {status}",
                show=False,
            )
            for key, status in STATUS_KEYS.items()
        ),
        _binding("0", "clear_filters", "All", "Clear every filter", show=False),
        _binding("s", "sort", "Sort", "Cycle the sort order"),
        _binding("full_stop", "step", "Step", "Replay: play one more event while paused"),
        _binding("plus", "speed(2.0)", "Faster", "Replay: play twice as fast"),
        _binding("minus", "speed(0.5)", "Slower", "Replay: play half as fast"),
        _binding("p", "pause", "Pause", "Pause or resume repainting"),
        _binding("e", "export", "Export", "Write the shown rows to JSONL and CSV"),
        _binding("l", "event_log", "Log", "Show or hide the event log"),
        _binding("question_mark,f1", "help", "Help", "All keys and the phase track legend"),
        _binding("q", "quit_dashboard", "Quit", "Quit (asks what to do with rollouts in flight)"),
    ]

    def __init__(
        self,
        source: DashboardSource,
        *,
        clock: Clock = time.monotonic,
        export_dir: Path | None = None,
        start_work: bool = True,
    ) -> None:
        super().__init__()
        self.source = source
        self.board = source.board
        self.clock = clock
        self.export_dir = export_dir or Path.cwd()
        self.start_work = start_work
        self.paused = False
        self.quitting = False
        self._shown_details: str | None = None
        self._logged_poll_errors: set[str] = set()

    # -- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield SummaryStrip(id="summary")
        with Horizontal(id="main"):
            with Vertical(id="table-column"):
                yield Static(self._column_titles(), id="column-header")
                yield RolloutTable(self.board, clock=self.clock, id="table")
                yield Input(
                    placeholder="filter: text in id, row, status, error or label", id="filter-bar"
                )
                yield EventLog(id="event-log")
            yield DetailsPane(id="details")
        yield Static(id="status-line")
        yield Footer()

    @staticmethod
    def _column_titles() -> Text:
        return Text("".join(_cell(c.title, c.width, c.align) for c in COLUMNS), no_wrap=True)

    @property
    def table(self) -> RolloutTable:
        return self.query_one(RolloutTable)

    def on_mount(self) -> None:
        self.table.focus()
        self.set_interval(1 / REPAINT_HZ, self.repaint)
        self.set_interval(1.0, self._tick)
        self.set_interval(5.0, self._sample_throughput)
        self.repaint()
        if self.start_work:
            self.run_source()

    @work(exit_on_error=False, group="source")
    async def run_source(self) -> None:
        try:
            await self.source.run()
        except Exception as exc:  # the run failed as a whole: say so, keep the dashboard
            self.report(f"the run stopped: {exc}", severity="error")
        self.repaint()
        if self.quitting:
            self.exit()
        else:
            self.report("the run has ended; q quits", severity="information")

    # -- repainting ------------------------------------------------------------------------

    def repaint(self) -> None:
        """Take the board's change batch and repaint what it touched (a few times a second)."""
        if self.paused:
            return
        batch = self.board.take_changes()
        table = self.table
        table.apply_changes(batch.ids, batch.added)
        self._log_new_problems(batch.ids)
        self._update_summary()
        details = self.query_one(DetailsPane)
        if details.has_class("-open") and (
            table.cursor_id in batch.ids or table.cursor_id != self._shown_details
        ):
            self._show_details()

    def _tick(self) -> None:
        if not self.paused:
            self.table.tick()
            if self.query_one(DetailsPane).has_class("-open"):
                self._show_details()

    def _sample_throughput(self) -> None:
        self.query_one(SummaryStrip).sample_throughput(self.source.progress().done)

    def _update_summary(self) -> None:
        now = self.clock()
        elapsed = now - self.board.started_at
        self.query_one(RunHeader).show(
            self.source.title, self.source.subtitle, self.source.servers(), elapsed
        )
        self.query_one(SummaryStrip).show(
            self.board, self.board.counts(now), self.source.progress(), elapsed
        )
        table = self.table
        filters = []
        if table.filter_text:
            filters.append(f"text {table.filter_text!r}")
        if table.filter_statuses is not None:
            filters.append("status " + "+".join(sorted(table.filter_statuses)))
        if table.stuck_only:
            filters.append("stuck only")
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{len(table.order)} of {len(self.board)} shown", "bold")
        if filters:
            line.append("  filter: " + ", ".join(filters))
        line.append(f"  sort: {SORTS[table.sort]}")
        if table.marks:
            line.append(f"  {len(table.marks)} marked", "yellow")
        if self.paused:
            line.append("  PAUSED (p resumes)", "bold yellow")
        if self.source.read_only:
            line.append("  replay (read-only)", "cyan")
        self.query_one("#status-line", Static).update(line)

    def _log_new_problems(self, changed: Iterable[str]) -> None:
        for rollout_id in changed:
            record = self.board.records.get(rollout_id)
            if record is None or not record.poll_error or rollout_id in self._logged_poll_errors:
                continue
            if record.handle is not None and record.handle.done():
                self._logged_poll_errors.add(rollout_id)
                self.report(
                    f"polling {rollout_id[:10]} failed: {record.poll_error}", severity="error"
                )

    def report(self, message: str, *, severity: str = "information") -> None:
        """A toast and an event-log line (the message may hold untrusted text: never markup)."""
        self.query_one(EventLog).add(self.clock() - self.board.started_at, message)
        self.notify(Text(message).plain, severity=severity, markup=False)  # type: ignore[arg-type]

    # -- selection and details -------------------------------------------------------------

    def selected(self) -> RolloutRecord | None:
        rollout_id = self.table.cursor_id
        return None if rollout_id is None else self.board.records.get(rollout_id)

    @on(RolloutTable.CursorMoved)
    def _cursor_moved(self) -> None:
        self.refresh_bindings()
        if self.query_one(DetailsPane).has_class("-open"):
            self._show_details()

    @on(RolloutTable.Chosen)
    def _chosen(self) -> None:
        self.action_details()

    def _show_details(self) -> None:
        record = self.selected()
        self._shown_details = record.rollout_id if record else None
        self.query_one(DetailsPane).show(record, self.board, self.clock())

    def action_details(self) -> None:
        pane = self.query_one(DetailsPane)
        pane.toggle_class("-open")
        if pane.has_class("-open"):
            self._show_details()

    # -- enabling ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """None greys a binding out: the action makes no sense for the selected row."""
        record = self.selected()
        live = not self.source.read_only
        if action == "cancel_server":
            return (
                live and record is not None and record.in_flight and record.client is not None
            ) or None
        if action == "untrack":
            return (live and record is not None and record.in_flight) or None
        if action == "rerun":
            return (
                live and record is not None and record.finished and record.options is not None
            ) or None
        if action in ("new_rollout", "cancel_marked"):
            return live or None
        if action in ("step", "speed"):
            return isinstance(self.source, ReplaySource)  # hidden on live runs
        return True

    # -- actions -----------------------------------------------------------------------------

    def action_cancel_server(self) -> None:
        record = self.selected()
        if record is None or not record.in_flight:
            return
        question = Text.assemble(
            "Cancel rollout ",
            (record.rollout_id, "bold"),
            f" (row {record.row_index}) on ",
            (record.server or "its server", "bold"),
            "?\n\nThe server stops its work; the row ends as cancelled.",
        )
        self._confirm_then_cancel(question, [record.rollout_id])

    def action_cancel_marked(self) -> None:
        table = self.table
        ids = [
            rid
            for rid in (table.marks or table.order)
            if (r := self.board.records.get(rid)) and r.in_flight
        ]
        if not ids:
            self.report("nothing in flight to cancel", severity="warning")
            return
        scope = "marked" if table.marks else "shown"
        question = Text(f"Cancel {len(ids)} {scope} rollouts on their servers?")
        self._confirm_then_cancel(question, ids)

    def _confirm_then_cancel(self, question: Text, ids: list[str]) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self._cancel(ids)

        self.push_screen(ConfirmScreen(question), answered)

    @work(exit_on_error=False, group="cancel")
    async def _cancel(self, ids: list[str]) -> None:
        self.table.clear_marks(ids)
        answers = await self.board.cancel_on_server(ids)
        failed = {rid: answer for rid, answer in answers.items() if answer.startswith("error")}
        for rollout_id, answer in failed.items():
            self.report(f"cancel {rollout_id[:10]} failed: {answer}", severity="error")
        done = len(answers) - len(failed)
        if done:
            summary = ", ".join(f"{rid[:10]}: {answers[rid]}" for rid in list(answers)[:3])
            more = f" and {done - 3} more" if done > 3 else ""
            self.report(f"cancel requested for {done}: {summary}{more}")
        self.repaint()

    def action_untrack(self) -> None:
        record = self.selected()
        if record is None:
            return
        if self.board.stop_tracking([record.rollout_id]):
            self.report(
                f"stopped tracking {record.rollout_id[:10]}; "
                "the server keeps it until its lease ends"
            )
        self.repaint()

    def action_mark(self) -> None:
        self.table.toggle_mark()
        self._update_summary()

    def action_new_rollout(self) -> None:
        self.push_screen(NewRolloutScreen(), self._submit)

    def _submit(self, rollout: NewRollout | None) -> None:
        if rollout is not None:
            self._send(rollout)

    @work(exit_on_error=False, group="submit")
    async def _send(self, rollout: NewRollout | None, rerun_of: str | None = None) -> None:
        try:
            if rerun_of is not None:
                new_id = await self.source.rerun(rerun_of)
                self.report(f"re-running {rerun_of[:10]} as {new_id[:10]}")
            else:
                assert rollout is not None
                new_id = await self.source.submit(rollout)
                self.report(f"submitted {new_id[:10]}")
        except Exception as exc:
            self.report(f"could not submit: {exc}", severity="error")
            return
        self.repaint()
        self.table.move_cursor_to(new_id)

    def action_rerun(self) -> None:
        record = self.selected()
        if record is not None and record.finished:
            self._send(None, rerun_of=record.rollout_id)

    def action_filter(self) -> None:
        bar = self.query_one("#filter-bar", Input)
        bar.add_class("-open")
        bar.value = self.table.filter_text
        bar.focus()

    @on(Input.Changed, "#filter-bar")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.table.filter_text = event.value
        self.table.rebuild()
        self._update_summary()

    @on(Input.Submitted, "#filter-bar")
    def _filter_done(self) -> None:
        bar = self.query_one("#filter-bar", Input)
        if not bar.value:
            bar.remove_class("-open")
        self.table.focus()

    def action_status_filter(self, status: str) -> None:
        table = self.table
        current = set(table.filter_statuses or ())
        current.symmetric_difference_update({status})
        table.filter_statuses = frozenset(current) or None
        table.rebuild()
        self._update_summary()

    def action_stuck_only(self) -> None:
        self.table.stuck_only = not self.table.stuck_only
        self.table.rebuild()
        self._update_summary()

    def action_clear_filters(self) -> None:
        table = self.table
        table.filter_text, table.filter_statuses, table.stuck_only = "", None, False
        bar = self.query_one("#filter-bar", Input)
        bar.value = ""
        bar.remove_class("-open")
        table.rebuild()
        self._update_summary()

    def action_sort(self) -> None:
        table = self.table
        names = list(SORTS)
        table.sort = names[(names.index(table.sort) + 1) % len(names)]
        table.rebuild()
        self._update_summary()

    def action_step(self) -> None:
        if isinstance(self.source, ReplaySource):
            if not self.source.paused:
                self.source.toggle_pause()
            self.source.step()

    def action_speed(self, factor: float) -> None:
        if isinstance(self.source, ReplaySource):
            if factor > 1:
                self.source.faster()
            else:
                self.source.slower()
            self._update_summary()

    def action_pause(self) -> None:
        if isinstance(self.source, ReplaySource):
            # A replay pauses the recording itself; the screen keeps following it.
            self.source.toggle_pause()
            self._update_summary()
            return
        self.paused = not self.paused
        if not self.paused:
            self.repaint()
        self._update_summary()

    def action_event_log(self) -> None:
        self.query_one(EventLog).toggle_class("-open")

    def action_help(self) -> None:
        shown = [
            (binding.key_display or binding.key, binding.tooltip or binding.description)
            for binding in self.BINDINGS
            if isinstance(binding, Binding)
        ]
        shown += [
            ("up/down, pgup/pgdn, home/end", "Move the cursor"),
            ("ctrl+p", "Command palette"),
        ]
        self.push_screen(HelpScreen(shown, LEGEND))

    def action_export(self) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = self.export_dir / f"osmosis-tui-export-{stamp}"
        rows = [
            export_row(self.board.records[rid], self.board.started_at) for rid in self.table.order
        ]
        try:
            base.with_suffix(".jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
            with base.with_suffix(".csv").open("w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(EXPORT_FIELDS))
                writer.writeheader()
                writer.writerows(rows)
        except OSError as exc:
            self.report(f"export failed: {exc}", severity="error")
            return
        self.report(f"exported {len(rows)} rows to {base}.jsonl and .csv")

    def action_quit_dashboard(self) -> None:
        if self.source.read_only or self.source.finished:
            self.exit()
            return
        in_flight = sum(1 for record in self.board if record.in_flight)
        if in_flight == 0:
            self._stop(cancel=False)
            return
        self.push_screen(QuitScreen(in_flight), self._quit_choice)

    def _quit_choice(self, choice: str | None) -> None:
        if choice in ("cancel", "leave"):
            self._stop(cancel=choice == "cancel")

    def _stop(self, *, cancel: bool) -> None:
        self.quitting = True
        self.report("cancelling in-flight rollouts, then quitting…" if cancel else "quitting…")
        self.run_worker(self.source.interrupt(cancel_in_flight=cancel), exit_on_error=False)
        if self.source.finished:
            self.exit()

    # -- command palette ---------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for binding in self.BINDINGS:
            if isinstance(binding, Binding) and binding.show:
                action = binding.action
                yield SystemCommand(
                    binding.description,
                    f"{binding.tooltip} ({binding.key_display or binding.key})",
                    lambda action=action: self.run_action(action),
                )


EXPORT_FIELDS = (
    "rollout_id",
    "row_index",
    "run_index",
    "status",
    "reward",
    "err_category",
    "err_message",
    "observed",
    "skipped",
    "server",
)


def export_row(record: RolloutRecord, t0: float) -> dict[str, object]:
    result = record.latest_result
    return {
        "rollout_id": record.rollout_id,
        "row_index": record.row_index,
        "run_index": record.run_index,
        "status": record.display_status,
        "reward": result.sample.reward if result and result.sample else None,
        "err_category": result.err_category.value if result and result.err_category else None,
        "err_message": (result.err_message if result else None) or record.admission_error,
        "observed": " ".join(f"{t.status.value}@{t.at - t0:.3f}" for t in record.transitions),
        "skipped": " ".join(f"{k.value}:{v}" for k, v in record.skipped_phases().items()),
        "server": record.server,
    }


def create_app(
    source: DashboardSource,
    *,
    clock: Clock = time.monotonic,
    export_dir: Path | None = None,
    start_work: bool = True,
) -> DashboardApp:
    """The one way to build the dashboard, shared by the CLI, the tests and the screenshots."""
    return DashboardApp(source, clock=clock, export_dir=export_dir, start_work=start_work)
