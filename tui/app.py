"""The dashboard: a live table of every rollout moving through its phases (DESIGN.md §2).

The app reads the board's change batches on a timer (never per event, never over HTTP) and
repaints only what changed. Actions go back through the source: cancel on the server, stop
tracking locally, submit, re-run. Errors become toasts, row flags and event-log lines; they
never end the app.

The keys and when each applies are in bindings.py; the keys that take more than one step
(cancel, submit, quit, steering the dispatch) hand over to their flow in flows/. Every way
out (`q`, ctrl+q, ctrl+c, the palette's Quit) is the quit flow's.

The theme and the sort are remembered between runs (settings.py).

An error in the dashboard itself (a widget that fails to draw, a handler that raises) closes
it at once (`_fatal_error`); its caller says it in one line and ends the run as a quit does.

Once the source's work has ended, the app's time stops there (`now`): the clock, the ETA,
the durations and the sparkline stand still, and the end banner says why it ended and how
to go on, until the app quits.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal, Vertical
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.notifications import Notification, Notify
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Input

from core.board import RolloutBoard
from core.eval.results.export import write_export
from core.eval.safe_text import multi_line
from core.rollout_record import RolloutRecord
from tui.bindings import (
    DASHBOARD_BINDINGS,
    FOOTER_PRIORITY,
    action_state,
    help_lines,
    key_states,
    palette_commands,
)
from tui.flows.cancel import CancelFlow
from tui.flows.control import ControlFlow
from tui.flows.playback import PlaybackFlow
from tui.flows.quit import QuitFlow
from tui.flows.submit import SubmitFlow
from tui.flows.timeline import TimelineFlow
from tui.screens.attempt_grid import AttemptGridScreen
from tui.screens.dialogs import HelpScreen
from tui.screens.distributions import DistributionsScreen
from tui.screens.rollout_view import RolloutViewScreen
from tui.screens.servers import ServersScreen
from tui.screens.transcript import TranscriptScreen
from tui.settings import Settings, load_settings, save_settings, settings_path
from tui.sources.base import DashboardSource
from tui.terminal_driver import TerminalDriver
from tui.widgets.details import DetailsPane
from tui.widgets.end_banner import EndBanner
from tui.widgets.event_log import EventLog
from tui.widgets.fitted_footer import FittedFooter
from tui.widgets.format import one_line
from tui.widgets.grid.rows import GridRow
from tui.widgets.phase_track import LEGEND
from tui.widgets.silence_banner import SilenceBanner
from tui.widgets.status_line import StatusLine
from tui.widgets.summary import THROUGHPUT_WINDOW_SEC, RunHeader, SummaryStrip
from tui.widgets.table.columns import BASE, WATCH_COLUMNS
from tui.widgets.table.rollout_table import RolloutTable
from tui.widgets.table.sorting import Sort, next_sort, pick
from tui.widgets.table.view import RolloutPick, TableView, next_server, toggle_status
from tui.widgets.timeline.pane import TimelinePane

logger = logging.getLogger(__name__)

Clock = Callable[[], float]

REPAINT_HZ = 3.0
#: The frames of a dashboard error's traceback that are logged (the innermost: where it broke).
LOGGED_FRAMES = 40
#: How much of a dashboard error's message is said (it may quote the rollout's text).
SAID_ERROR_CHARS = 200


class DashboardApp(App[None]):
    """Watches a `DashboardSource` (a live eval, or a replay)."""

    CSS_PATH = "dashboard.tcss"
    TITLE = "osmosis-tui"

    header: RunHeader
    end_banner: EndBanner
    silence_banner: SilenceBanner
    summary: SummaryStrip
    table: RolloutTable
    filter_bar: Input
    event_log: EventLog
    details: DetailsPane
    status_line: StatusLine
    timeline_pane: TimelinePane
    BINDINGS = DASHBOARD_BINDINGS

    # -- view state: the table's filters and sort, and the pause -------------------------------
    # Set by the keys and the filter bar; the watchers redraw what depends on them.

    #: Text the shown rollouts hold (id, row, status, error or label); "" shows all.
    filter_text: var[str] = var("", init=False)
    #: The display statuses shown; None shows every status.
    filter_statuses: var[frozenset[str] | None] = var(None, init=False)
    #: Only the rollouts flagged stuck.
    stuck_only: var[bool] = var(False, init=False)
    #: The table's order (remembered between runs).
    sort: var[Sort] = var(Sort(), init=False)
    #: Only the rollouts sent to this server (its URL); None: every server's.
    filter_server: var[str | None] = var(None, init=False)
    #: Only one dataset row's attempts (`TableView.row`, from the attempts grid's `enter`).
    filter_row: var[tuple[int, str] | None] = var(None, init=False)
    #: Only the rollouts in flight at the timeline's cursor (`w`); None: at any time.
    in_flight_at: var[RolloutPick | None] = var(None, init=False)
    #: Only the rollouts of a histogram's bin (`h`, enter); None: no such pick. Esc clears it.
    filter_pick: var[RolloutPick | None] = var(None, init=False)

    @property
    def table_view(self) -> TableView:
        return TableView(
            self.filter_text,
            self.filter_statuses,
            self.stuck_only,
            self.sort,
            self.filter_server,
            self.filter_row,
            self.source.baseline,
            in_flight_at=self.in_flight_at,
            pick=self.filter_pick,
        )

    def _show_view(self) -> None:
        self.table.show(self.table_view)
        self.update_summary()

    watch_filter_text = watch_filter_statuses = watch_stuck_only = watch_sort = _show_view
    watch_filter_server = watch_filter_row = watch_in_flight_at = watch_filter_pick = _show_view

    #: Follow mode: the cursor goes to each new rollout shown (as `tail -f`).
    follow: var[bool] = var(False, init=False)

    def watch_follow(self, follow: bool) -> None:
        self.table.follow = follow
        if follow:
            self.table.follow_newest()
        self.update_summary()

    #: Repainting stops (a live run: the board goes on; a replay pauses its playback instead).
    paused: var[bool] = var(False, init=False)

    def watch_paused(self, paused: bool) -> None:
        if not paused:
            self.repaint()  # catch up at once
        self.update_summary()

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
        #: "idle" when the app does not drive the source (start_work=False), else "running"
        #: until the source's run returns or fails, then "ended".
        self.run_state: Literal["idle", "running", "ended"] = "idle"
        self.cancel_flow = CancelFlow(self)
        self.submit_flow = SubmitFlow(self)
        self.quit_flow = QuitFlow(self)
        self.control_flow = ControlFlow(self)
        self.playback = PlaybackFlow(self)
        self.timeline_flow = TimelineFlow(self)
        self._shown_details: str | None = None
        #: The app's time when it saw the source's work end: `now` stays there.
        self._ended_at: float | None = None
        #: What the footer's keys were last shown to do (`key_states`).
        self._key_states: tuple[bool | None, ...] = ()
        self._sampled_at: float | None = None
        self._logged_poll_errors: set[str] = set()
        #: The latest notification of each topic (`report`).
        self._topic_notices: dict[str, Notification] = {}
        #: What failed in the dashboard itself, as one line (`note_failure`); None: nothing.
        self.failure: str | None = None
        self.settings_file = settings_path()
        self._apply_settings(load_settings(self.settings_file))
        #: What the app does once its terminal is gone (`TerminalDriver.Lost`): exit, unless
        #: the front end that runs it ends its work first (`run_and_close`).
        self.on_terminal_lost: Callable[[], None] = self.exit

    # -- the terminal ------------------------------------------------------------------------

    def get_driver_class(self) -> type[Driver]:
        chosen = super().get_driver_class()
        # Textual's own on Linux and macOS, made safe for a terminal that goes away.
        return TerminalDriver if chosen is LinuxDriver else chosen

    @on(TerminalDriver.Lost)
    def _terminal_lost(self) -> None:
        self.on_terminal_lost()

    def give_up_terminal(self) -> None:
        """Wait on a terminal that takes no output no longer than `GIVE_UP_AFTER_SEC`: the
        app is about to close. Safe from a signal handler."""
        driver = self._driver
        if isinstance(driver, TerminalDriver):
            driver.give_up_terminal()

    @property
    def terminal_gone(self) -> bool:
        """The terminal failed a write or was given up: nothing written to it arrives."""
        driver = self._driver
        return isinstance(driver, TerminalDriver) and driver.output.gone

    # -- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # Kept as attributes, not queried: timers may still fire while the app shuts down
        # and its widgets are already gone from the DOM.
        self.header = RunHeader(id="header")
        self.end_banner = EndBanner(id="end-banner")
        self.silence_banner = SilenceBanner(id="silence-banner")
        self.summary = SummaryStrip(id="summary")
        self.table = RolloutTable(
            self.board,
            clock=self.now,
            baseline=self.source.baseline,
            watch_rows=self.source.is_watch,
            id="table",
        )
        self.filter_bar = Input(
            placeholder="filter: text in id, row, status, error or label", id="filter-bar"
        )
        self.event_log = EventLog(id="event-log")
        self.details = DetailsPane(id="details")
        self.status_line = StatusLine(id="status-line")
        self.timeline_pane = TimelinePane(
            can_seek=lambda: self.source.playback is not None, id="timeline"
        )
        yield self.header
        yield self.end_banner
        yield self.silence_banner
        yield self.summary
        with Horizontal(id="main"):
            with Vertical(id="table-column"):
                yield self.timeline_pane
                yield self.table
                yield self.filter_bar
                yield self.event_log
            yield self.details
        yield self.status_line
        yield FittedFooter(FOOTER_PRIORITY)

    def on_mount(self) -> None:
        table = self.table
        table.focus()
        # The board may hold rollouts already (a resumed run, a prepared state): show them all;
        # from here on only change batches are applied.
        table.show(self.table_view)
        self.watch(self, "theme", self._remember_settings, init=False)
        self.watch(self, "sort", self._remember_settings, init=False)
        self.set_interval(1 / REPAINT_HZ, self.repaint)
        self.set_interval(1.0, self._tick)
        self._sample_throughput()  # the baseline
        self._see_if_ended()
        self.update_summary()
        self.repaint()
        if self.start_work:
            self.run_source()

    @work(exit_on_error=False, group="source")
    async def run_source(self) -> None:
        self.run_state = "running"
        try:
            await self.source.run()
        except Exception as exc:  # the run failed as a whole: say so, keep the dashboard
            self.report(f"the run stopped: {exc}", severity="error")
        finally:
            self.run_state = "ended"
        self.repaint()
        if self.quit_flow.quitting:
            self.exit()
        else:
            self.report("the run has ended; q quits", severity="information")

    def now(self) -> float:
        """The app's time: its clock's while the work goes on, then the moment it ended."""
        return self.clock() if self._ended_at is None else self._ended_at

    def _see_if_ended(self) -> None:
        """Once the source's work has ended: stop the time, show the banner."""
        if self._ended_at is not None:
            return
        ending = self.source.ending
        if ending is None:
            return
        self._ended_at = self.clock()
        self.end_banner.show(ending)
        self.table.tick()  # durations as they were at the end
        self.update_summary()
        self.keys_may_have_changed()  # nothing can be sent any more

    # -- repainting ------------------------------------------------------------------------

    def repaint(self) -> None:
        """Take the board's change batch and repaint what it touched (a few times a second)."""
        if self.paused:
            return
        self.playback.sync()
        self._see_if_ended()
        batch = self.board.take_changes()
        table = self.table
        if batch.ids or batch.added:  # the clock's own progress is the tick's job
            table.apply_changes(batch.ids, batch.added)
            self._log_new_problems(batch.ids)
            self.update_summary()
        # E.g. the selected rollout finished (cancel greys out), or the servers came up or
        # went away (new and re-run).
        self.keys_may_have_changed()
        for screen in self.screen_stack:
            if isinstance(screen, (AttemptGridScreen, ServersScreen)):
                screen.repaint()  # on this timer too, never per event
        self.timeline_flow.update()
        details = self.details
        if details.has_class("-open") and (
            table.cursor_id in batch.ids or table.cursor_id != self._shown_details
        ):
            self._show_details()

    def use_board(self, board: RolloutBoard) -> None:
        """Show `board` from scratch instead of the board shown: a replay that went back has
        played its recording again onto a new one. A replay no longer at its end goes on."""
        self.board = board
        self.table.use_board(board)
        self.summary.restart_throughput()
        self._sampled_at = None
        if self._ended_at is not None and self.source.ending is None:
            self._ended_at = None
            self.end_banner.hide()
        self.update_summary()
        self.keys_may_have_changed()
        if self.details.has_class("-open"):
            self._show_details()

    def keys_may_have_changed(self) -> None:
        """Show the footer's keys again when what one of them can do changed. Textual
        recomposes the footer on every `refresh_bindings` (a dozen widgets mounted and
        styled): done at every repaint that touched the selected row, it cost the run ~4% of
        its throughput with the dashboard open (bench/dashboard_pty.py)."""
        states = key_states(self)
        if states != self._key_states:
            self._key_states = states
            self.refresh_bindings()

    def _tick(self) -> None:
        """Once a second: elapsed times move on (table, header, details) while the work goes on."""
        if self._ended_at is not None:
            return
        self._sample_throughput()
        if not self.paused:
            self.table.tick()
            self.update_summary()
            if self.details.has_class("-open"):
                self._show_details()

    def _sample_throughput(self) -> None:
        """One sparkline sample per window of the app's clock: run time for a live run,
        recording time for a replay, and none at all on a frozen clock (snapshots)."""
        now = self.clock()
        if self._sampled_at is not None and now - self._sampled_at < THROUGHPUT_WINDOW_SEC:
            return
        self._sampled_at = now
        # This session's finishes only: a resume's carried-over results finished before it.
        self.summary.sample_throughput(self.source.progress().done_here)

    def update_summary(self) -> None:
        """Header, summary strip and status line, from the board and the source as they are."""
        now = self.now()
        elapsed = now - self.board.started_at
        dispatch = self.source.dispatch()
        self.header.show(self.source.title, self.source.subtitle, self.source.servers(), elapsed)
        self.silence_banner.show(self.source.event_silence)
        self.summary.show(
            self.board,
            self.board.counts(now),
            self.source.progress(),
            elapsed,
            ended=self._ended_at is not None,
            manual=dispatch.manual if dispatch is not None else 0,
            tail=dispatch,
            dispatch_paused=dispatch is not None and dispatch.paused,
            versus=self.source.baseline_counts(),
            watch=self.source.is_watch,
            spend=self.source.spend(),
        )
        self.status_line.show(
            self.table_view,
            shown=len(self.table.order),
            total=len(self.board),
            marked=len(self.table.marks),
            paused=self.paused,
            read_only=self.source.read_only,
            dispatch=dispatch,
            following=self.follow,
            watch=self.source.is_watch,
        )

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

    def report(
        self, message: str, *, severity: str = "information", topic: str | None = None
    ) -> None:
        """A toast and an event-log line (the message may hold untrusted text: never markup).
        A `topic`'s toast replaces the one it showed last, still up or not: a key pressed ten
        times (`]`) is one notice that says the latest, not ten over the table; the event log
        keeps every line."""
        self.log_event(message)
        notification = Notification(
            multi_line(message),
            "",
            severity,  # type: ignore[arg-type]
            self.NOTIFICATION_TIMEOUT,
            markup=False,
        )
        if topic is None:
            self.post_message(Notify(notification))
            return
        # Taken down and put up at once, as Textual's own `Notify` handler puts one up: a
        # posted notice is not up yet when the next key press is handled, and would stay.
        previous = self._topic_notices.get(topic)
        if previous is not None:
            self._unnotify(previous, refresh=False)  # one no longer up is no matter
        self._topic_notices[topic] = notification
        self._notifications.add(notification)
        self._refresh_notifications()

    def log_event(self, message: str) -> None:
        """An event-log line without a toast (a start-up step: the header shows it too)."""
        self.event_log.add(self.clock() - self.board.started_at, message)

    # -- selection and details -------------------------------------------------------------

    def selected(self) -> RolloutRecord | None:
        rollout_id = self.table.cursor_id
        return None if rollout_id is None else self.board.records.get(rollout_id)

    @on(RolloutTable.CursorMoved)
    def _cursor_moved(self) -> None:
        if not self.screen_stack:
            return  # a row or a move (follow mode) arrived as the app closed: no screen left
        self.keys_may_have_changed()
        if self.details.has_class("-open"):
            self._show_details()

    def _show_details(self) -> None:
        record = self.selected()
        self._shown_details = record.rollout_id if record else None
        self.details.show(record, self.board, self.now())

    def action_details(self) -> None:
        pane = self.details
        pane.toggle_class("-open")
        if pane.has_class("-open"):
            self._show_details()

    def action_transcript(self) -> None:
        record = self.selected()
        if record is not None:
            self.push_screen(TranscriptScreen(self.source, record))

    def action_rollout_view(self) -> None:
        record = self.selected()
        if record is not None:
            self.push_screen(RolloutViewScreen(self.source, record, self.board, now=self.now))

    def action_timeline(self) -> None:
        self.timeline_flow.toggle()

    @on(TimelinePane.CursorMoved)
    def _timeline_cursor(self, event: TimelinePane.CursorMoved) -> None:
        self.timeline_flow.cursor_moved(event.t, event.in_flight)

    @on(TimelinePane.SeekAsked)
    def _timeline_seek(self, event: TimelinePane.SeekAsked) -> None:
        self.timeline_flow.seek(event.t)

    @on(TimelinePane.Closed)
    def _timeline_closed(self) -> None:
        self.timeline_flow.close()

    def action_copy_id(self) -> None:
        record = self.selected()
        if record is not None:
            self.copy_to_clipboard(record.rollout_id)
            self.notify(f"copied {one_line(record.rollout_id)}", markup=False)

    # -- enabling ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave_filter":
            # Only with something to leave: else escape keeps its Textual meanings.
            return (
                self.filter_bar.has_focus
                or bool(self.filter_text)
                or self.filter_row is not None
                or self.filter_pick is not None
                or None
            )
        if action == "sort_by" and parameters == (BASE,):  # its column shows with a baseline
            return self.source.baseline is not None
        if action == "sort_by" and self.source.is_watch:  # a watch's table has fewer columns
            return WATCH_COLUMNS.get(str(parameters[0]), True) is not None
        return action_state(action, self.source, self.selected())

    # -- actions -----------------------------------------------------------------------------

    def action_cancel_server(self) -> None:
        record = self.selected()
        if record is not None:
            self.cancel_flow.ask_one(record)

    def action_cancel_marked(self) -> None:
        self.cancel_flow.ask_marked()

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
        self.update_summary()

    def action_new_rollout(self) -> None:
        self.submit_flow.ask_new()

    def action_rerun(self) -> None:
        record = self.selected()
        if record is not None:
            self.submit_flow.rerun(record)

    def action_filter(self) -> None:
        bar = self.filter_bar
        bar.add_class("-open")
        bar.value = self.filter_text
        bar.focus()

    @on(Input.Changed, "#filter-bar")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value

    @on(Input.Submitted, "#filter-bar")
    def _filter_done(self) -> None:
        bar = self.filter_bar
        if not bar.value:
            bar.remove_class("-open")
        self.table.focus()

    def action_leave_filter(self) -> None:
        """`escape`, as in k9s: out of the filter bar, keeping the filter (as enter does);
        from the table, a histogram's bin is let go first, then the text filter and the grid's
        row are cleared (the status toggles stay: `0` clears all)."""
        bar = self.filter_bar
        if bar.has_focus:
            self._filter_done()
        elif self.filter_pick is not None:
            self.filter_pick = None
        else:
            self.filter_text = bar.value = ""
            self.filter_row = None
            bar.remove_class("-open")

    def action_status_filter(self, status: str) -> None:
        self.filter_statuses = toggle_status(self.filter_statuses, status)

    def action_stuck_only(self) -> None:
        self.stuck_only = not self.stuck_only

    def action_clear_filters(self) -> None:
        self.filter_text, self.filter_statuses, self.stuck_only = "", None, False
        self.filter_server = self.filter_row = self.filter_pick = None
        bar = self.filter_bar
        bar.value = ""
        bar.remove_class("-open")

    def action_sort(self) -> None:
        self.sort = next_sort(self.sort, baseline=self.source.baseline is not None)

    def action_sort_by(self, column: str) -> None:
        self.sort = pick(self.sort, column)

    @on(RolloutTable.HeaderSelected)
    def _header_selected(self, event: RolloutTable.HeaderSelected) -> None:
        self.action_sort_by(event.column)

    def action_server_filter(self) -> None:
        # A watch's rows name their server as its events do (`server_id`), not by its URL.
        servers = (
            []
            if self.source.is_watch
            else [server.url for server in self.source.servers() if not server.step]
        )
        servers += [record.server for record in self.board if record.server]
        self.filter_server = next_server(self.filter_server, servers)

    def action_distributions(self) -> None:
        """`h`: histograms of the rows shown; a bin picked there filters the table to it."""
        self.push_screen(
            DistributionsScreen(self._shown_records, filters=", ".join(self.table_view.filters())),
            self._picked,
        )

    def _shown_records(self) -> list[RolloutRecord]:
        """The rollouts the table shows, in its order (of the board shown now: a replay that
        went back has another)."""
        records = self.board.records
        return [records[rid] for rid in self.table.order if rid in records]

    def _picked(self, pick: RolloutPick | None) -> None:
        if pick is not None:
            self.filter_pick = pick

    def action_follow(self) -> None:
        self.follow = not self.follow

    def action_step(self) -> None:
        player = self.source.playback
        if player is not None:
            if not player.paused:
                player.toggle_pause()
            player.step()

    def action_speed(self, factor: float) -> None:
        player = self.source.playback
        if player is not None:
            if factor > 1:
                player.faster()
            else:
                player.slower()
            self.update_summary()

    def action_step_back(self) -> None:
        self.playback.step_back()

    def action_seek(self) -> None:
        self.playback.ask_time()

    def action_seek_start(self) -> None:
        self.playback.to_start()

    def action_seek_end(self) -> None:
        self.playback.to_end()

    def action_pause(self) -> None:
        """A replay's `p`: the recording itself pauses; the screen keeps following it."""
        player = self.source.playback
        if player is not None:
            player.toggle_pause()
            self.update_summary()

    def action_freeze(self) -> None:
        """A live run's `p`: the screen stops changing; the run goes on."""
        self.paused = not self.paused

    def action_attempt_grid(self) -> None:
        self.push_screen(AttemptGridScreen(self.source, self.board), self._show_row)

    def _show_row(self, row: GridRow | None) -> None:
        """The grid's `enter`: the table shows that row's attempts, the cursor on the first."""
        if row is None:
            return
        self.filter_row = (row.row_index, row.label)
        first = next((rid for rid in self.table.order if rid in row.rollouts), None)
        if first is not None:
            self.table.move_cursor_to(first)

    def action_servers(self) -> None:
        """`V`: the servers panel; `d` there drains a server or undrains it."""
        self.push_screen(
            ServersScreen(self.source, self.board, self.now, self.control_flow.toggle_drain)
        )

    def action_event_log(self) -> None:
        self.event_log.toggle_class("-open")

    def action_help(self) -> None:
        self.push_screen(HelpScreen(help_lines(self, watch=self.source.is_watch), LEGEND))

    def action_export(self) -> None:
        records = [self.board.records[rid] for rid in self.table.order]
        try:
            base, rows = write_export(self.export_dir, records, self.board.started_at)
        except OSError as exc:
            self.report(f"export failed: {exc}", severity="error")
            return
        self.report(f"exported {rows} rows to {base}.jsonl and .csv")

    def action_quit_dashboard(self) -> None:
        self.quit_flow.request()

    # Textual's own ways out (ctrl+q, the palette's Quit; ctrl+c, which only said to press
    # ctrl+q) take the same way as `q`.
    async def action_quit(self) -> None:
        self.quit_flow.request()

    def action_help_quit(self) -> None:
        self.quit_flow.request()

    # -- steering the dispatch (flows/control.py) ---------------------------------------------

    def action_pause_dispatch(self) -> None:
        self.control_flow.toggle_pause()

    def action_max_in_flight(self, step: int) -> None:
        self.control_flow.step_limit(step)

    def action_raise_budget(self) -> None:
        self.control_flow.raise_budget()

    def action_requeue(self) -> None:
        self.control_flow.ask_requeue()

    # -- settings (settings.py) ---------------------------------------------------------------

    def _apply_settings(self, saved: Settings) -> None:
        # A theme named by TEXTUAL_THEME is this run's choice; a theme that is gone is not.
        if saved.theme in self.available_themes and "TEXTUAL_THEME" not in os.environ:
            self.theme = saved.theme
        # A sort by the base column needs a baseline to compare with.
        baseline = self.source.baseline is not None
        if saved.sort is not None and (saved.sort.column != BASE or baseline):
            self.set_reactive(DashboardApp.sort, saved.sort)  # nothing is drawn yet

    def _remember_settings(self) -> None:
        save_settings(self.settings_file, Settings(self.theme, self.sort))

    # -- an error in the dashboard itself ----------------------------------------------------

    def _fatal_error(self) -> None:
        """Textual's end for an error nobody caught: it drew the traceback with every frame's
        locals inside the run's own event loop, which for a deep recursion took minutes and a
        GiB with the run's signals unanswered, and then the run died unwritten (issue 30). Here
        the error is noted (`note_failure`) and the app closes: its caller (`run_and_close`)
        says it and ends the run as a quit does, its results written. Textual has already kept
        the error (a test's pilot raises it again) and set the exit status."""
        error = sys.exc_info()[1] or self._exception  # Textual calls it where it caught it
        if error is not None:
            self.note_failure(error)
        self._close_messages_no_wait()

    def note_failure(self, error: BaseException) -> None:
        """Log an error in the dashboard itself (its traceback's innermost frames, no locals)
        and keep the first one's line (`failure`) to say once the terminal is back."""
        lines = traceback.format_exception(
            type(error), error, error.__traceback__, limit=-LOGGED_FRAMES
        )
        logger.error("the dashboard failed: %s", "".join(lines).rstrip())
        if self.failure is None:
            self.failure = one_line(f"{type(error).__name__}: {error}"[:SAID_ERROR_CHARS])

    # -- command palette ---------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        # Textual's Quit is left out: the dashboard's own (from its binding) says what it does.
        for command in super().get_system_commands(screen):
            if command.callback != self.action_quit:
                yield command
        yield from palette_commands(self)


def create_app(
    source: DashboardSource,
    *,
    clock: Clock = time.monotonic,
    export_dir: Path | None = None,
    start_work: bool = True,
) -> DashboardApp:
    """The one way to build the dashboard, shared by the CLI, the tests and the screenshots."""
    return DashboardApp(source, clock=clock, export_dir=export_dir, start_work=start_work)
