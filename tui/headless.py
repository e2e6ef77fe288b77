"""`osmosis-tui eval --headless`: the eval session with the line reporter and Ctrl-C handling."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from core.eval import EvalPlan, EvalSession
from core.eval.launcher import kill_launched_servers
from core.eval.reporter import HeadlessReporter

EXIT_COMPLETE = 0
EXIT_INCOMPLETE = 1


def run_headless(plan: EvalPlan, *, json_output: bool, on_interrupt: str) -> int:
    return asyncio.run(_run(plan, json_output=json_output, cancel=on_interrupt == "cancel"))


async def _run(plan: EvalPlan, *, json_output: bool, cancel: bool) -> int:
    reporter = HeadlessReporter(json_output=json_output)
    session = EvalSession(
        plan, on_start=reporter.start, on_result=reporter.result, on_notice=reporter.notice
    )
    loop = asyncio.get_running_loop()
    interrupts = 0
    pending: set[asyncio.Task[None]] = set()  # keeps the interrupt task alive until it ends

    def on_sigint() -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1:
            # Everything finished is already fsync'd in events.jsonl; nothing is lost by leaving.
            print("second interrupt: exiting now", file=sys.stderr, flush=True)
            kill_launched_servers()
            os._exit(EXIT_INCOMPLETE)
        action = "cancelling in-flight rollouts on the server" if cancel else "leaving them"
        print(
            f"interrupted: no new rollouts; {action} (Ctrl-C again to exit at once)",
            file=sys.stderr,
            flush=True,
        )
        task = loop.create_task(session.interrupt(cancel_in_flight=cancel))
        pending.add(task)
        task.add_done_callback(pending.discard)

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    loop.add_signal_handler(signal.SIGTERM, on_sigint)
    try:
        summary = await session.run()
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)
    reporter.finish(summary)
    return EXIT_COMPLETE if summary.status == "complete" else EXIT_INCOMPLETE
