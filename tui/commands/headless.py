"""`osmosis-tui eval --headless`: the eval session with the line reporter and Ctrl-C handling."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys

from core.eval import EvalPlan, EvalSession
from core.eval.attach.endpoint import ControlEndpoint
from core.eval.gc_tuning import settled_for_a_run
from core.eval.reporter import (
    HeadlessReporter,
    OutputMode,
    RunReport,
    display_path,
)
from core.eval.results.folder import LOGS_FILE
from core.eval.servers.launcher import kill_launched_servers
from tui.commands import exit_codes
from tui.commands.attach import attach_hint
from tui.commands.log_follower import LogFollower
from tui.commands.std_streams import forgiving_std_streams

# Ctrl-C, a polite kill, and the terminal closing: each one interrupts the run gracefully
# (results written, exit 1), a second one exits at once.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_headless(
    plan: EvalPlan, *, mode: OutputMode, on_interrupt: str, rerun: str, verbose: bool
) -> int:
    """Run `plan`, print the end of the run in `mode`; `rerun` is the command that repeats
    its inputs (for the resume and retry hints), `verbose` streams logs.txt to stderr."""
    folder = display_path(plan.request.output / plan.run_name)
    # A reader that goes away (`| head`) or a full device must not stop the run or lose its
    # results: the exit status stays the run's.
    with forgiving_std_streams(f"its results are in {folder}"), settled_for_a_run():
        return asyncio.run(
            _run(plan, mode=mode, cancel=on_interrupt == "cancel", rerun=rerun, verbose=verbose)
        )


async def _run(plan: EvalPlan, *, mode: OutputMode, cancel: bool, rerun: str, verbose: bool) -> int:
    reporter = HeadlessReporter(mode=mode)

    def started(name: str, todo: int, done: int) -> None:
        reporter.start(name, todo, done)
        # The run folder is open: its control socket goes in it, and the user is told once.
        if endpoint.open() is not None:
            print(attach_hint(plan), file=sys.stderr, flush=True)

    session = EvalSession(
        plan, on_start=started, on_result=reporter.result, on_notice=reporter.notice
    )
    # Nobody is here to press P: a budget pause could hold the run for good. The budget
    # only stops it when the spend reaches it.
    session.budget.pauses = False
    endpoint = ControlEndpoint(session, rerun=rerun)
    loop = asyncio.get_running_loop()
    interrupts = 0
    pending: set[asyncio.Task[None]] = set()  # keeps the interrupt task alive until it ends

    def on_interrupt() -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1:
            # Everything finished is already fsync'd in events.jsonl; nothing is lost by leaving.
            print("second interrupt: exiting now", file=sys.stderr, flush=True)
            kill_launched_servers()
            os._exit(exit_codes.NOT_DONE)
        action = "cancelling in-flight rollouts on the server" if cancel else "leaving them"
        print(
            f"interrupted: no new rollouts; {action} (Ctrl-C again to exit at once)",
            file=sys.stderr,
            flush=True,
        )
        task = loop.create_task(session.interrupt(cancel_in_flight=cancel))
        pending.add(task)
        task.add_done_callback(pending.discard)

    log_path = plan.request.output / plan.run_name / LOGS_FILE
    follower = LogFollower(log_path, sys.stderr) if verbose else None
    following = loop.create_task(follower.follow()) if follower is not None else None
    for signum in INTERRUPTS:
        loop.add_signal_handler(signum, on_interrupt)
    try:
        summary = await session.run()
    except BaseException as exc:
        await endpoint.close(None, failure=str(exc) or type(exc).__name__)
        raise
    else:
        await endpoint.close(summary)
    finally:
        for signum in INTERRUPTS:
            loop.remove_signal_handler(signum)
        if following is not None and follower is not None:
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following
            follower.drain()
    reporter.finish(RunReport.of(summary, plan, session.board, rerun, session.budget.spend()))
    return exit_codes.OK if summary.status == "complete" else exit_codes.NOT_DONE
