"""`osmosis-tui eval` with the dashboard: run the app, end the run, then print the end of it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from core.eval import EvalPlan
from core.eval.gc_tuning import settled_for_a_run
from core.eval.reporter import OutputMode, RunReport, print_report
from tui.app import DashboardApp, create_app
from tui.commands import exit_codes
from tui.commands.std_streams import forgiving_std_streams
from tui.sources.live import LiveSource

# A polite kill and the terminal closing end the dashboard as `q` then "leave" would: no new
# rollouts, those in flight left to their leases, the results written (exit 1). A SIGTERM
# after either exits at once (everything finished is already in events.jsonl). A hang-up is
# one event however many SIGHUPs it brings (the kernel's, then the shell's to its jobs): a
# SIGHUP never cuts the run's end short. Ctrl-C is a key here.
STOPS = (signal.SIGTERM, signal.SIGHUP)


def run_dashboard(plan: EvalPlan, *, mode: OutputMode, rerun: str) -> int:
    """Run `plan` on the dashboard; once it is closed, print the end of the run in `mode`
    (`rerun`: the command that repeats the run's inputs, for the hints)."""

    def notice(message: str) -> None:
        # Notices come once the app runs, by which time `app` below exists.
        app.call_later(app.report, message, severity="warning")

    def step(message: str) -> None:
        # In the event log only: the header shows the step in progress.
        app.call_later(app.log_event, message)

    source = LiveSource(plan, rerun=rerun, on_notice=notice, on_step=step)
    source.session.claim_name()  # a name in use is refused before the dashboard opens
    app = create_app(source, export_dir=plan.request.output)
    with settled_for_a_run():
        asyncio.run(run_and_close(app))
    if source.refused is not None:
        raise source.refused  # bad input found once running: the CLI exits 2 with it
    summary = source.summary
    if summary is None:
        print("the run did not finish; what finished is in the results folder", file=sys.stderr)
        return exit_codes.NOT_DONE
    # The terminal may be gone (the signal that ended the app was its hang-up): the report
    # is lost then, never the exit status.
    with forgiving_std_streams(f"its results are in {summary.folder}"):
        print_report(RunReport.of(summary, plan, source.board, rerun, source.spend()), mode)
    return exit_codes.OK if summary.status == "complete" else exit_codes.NOT_DONE


async def run_and_close(app: DashboardApp, **run_options: Any) -> None:
    """Run `app` (`run_options` as `App.run_async` takes them); however it ends (a quit, a
    second `q` while the run winds down, an error anywhere in it, SIGTERM, SIGHUP, or its
    terminal gone), then end its source's work and wait until the results are written. An
    error in the dashboard is said in one line (its traceback is in the log), never raised
    from here.

    The run's end never waits on the terminal: a stop starts it at once, beside the app's
    shutdown (which gives up a terminal that takes no output, `TerminalDriver`), and the
    signal handlers are Python's own, which run even while the event loop waits on a write.
    """
    loop = asyncio.get_running_loop()
    signalled_before = False
    ending: asyncio.Future[None] | None = None

    def end_now() -> None:
        nonlocal ending
        if ending is None:  # the run's end, whatever becomes of the app's shutdown
            ending = asyncio.ensure_future(app.source.close())
        app.exit()

    def signalled(signum: int, _frame: object) -> None:
        nonlocal signalled_before
        if signalled_before and signum == signal.SIGTERM:
            os._exit(exit_codes.NOT_DONE)
        app.give_up_terminal()
        if not signalled_before:
            signalled_before = True
            loop.call_soon_threadsafe(end_now)

    app.on_terminal_lost = end_now
    previous = {signum: signal.signal(signum, signalled) for signum in STOPS}
    try:
        await app.run_async(**run_options)
    except Exception as error:
        # An error past Textual's own catching (a screen that failed to draw failing again as
        # the app closes): noted as the others are, and the run ends below all the same.
        app.note_failure(error)
    finally:
        with forgiving_std_streams("the run goes on to write its results"):
            if app.failure is not None:
                print(f"osmosis-tui: the dashboard failed ({app.failure})", file=sys.stderr)
            # Only while the run goes on: one that ended without results (refused at
            # start-up) has nothing to wind down or write.
            if app.run_state == "running" and not app.terminal_gone:
                print("winding the run down and writing its results…", file=sys.stderr, flush=True)
            await (app.source.close() if ending is None else ending)
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
