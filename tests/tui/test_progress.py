"""The summary strip against a live eval: the work items not dispatched yet are counted, and the
ETA knows about in-flight and stuck work (no number rather than a wrong one)."""

from __future__ import annotations

import asyncio
import re

from tests.polling import eventually
from tests.tui.helpers import SIZE, LiveFactory, make_app, row, text_of, until
from tui.app import DashboardApp
from tui.widgets.summary import RATE_WINDOWS, THROUGHPUT_WINDOW_SEC, SummaryStrip

IN_FLIGHT = {"sleep": 30}


def strip(app: DashboardApp) -> str:
    return " ".join(text_of(app.summary).split())


def eta_number(app: DashboardApp) -> bool:
    return re.search(r"ETA ≥?\d", strip(app)) is not None


async def test_items_not_dispatched_are_counted_and_nothing_finished_has_no_eta(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(**IN_FLIGHT)] * 5, max_in_flight=2) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "running 2" in strip(app))
            said = strip(app)
            assert "not dispatched 3" in said and "queued 0" in said
            assert "ETA —" in said and not eta_number(app)


async def test_every_slot_held_by_a_stuck_rollout_is_said(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT)] * 3, max_in_flight=2, stuck_after_sec=0.5) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "every slot held by a stuck rollout (2)" in strip(app))
            assert "not dispatched 1" in strip(app)
            assert not eta_number(app)


async def test_with_only_stuck_rollouts_left_the_eta_is_no_number(live_eval: LiveFactory) -> None:
    rows = [row(), row(), row(**IN_FLIGHT), row(**IN_FLIGHT)]
    async with live_eval(rows, max_in_flight=4, stuck_after_sec=0.5) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "only 2 stuck rollouts left" in strip(app))
            assert "not dispatched 0" in strip(app)
            assert not eta_number(app)


async def test_rollouts_running_far_longer_than_the_rest_leave_no_eta(
    live_eval: LiveFactory,
) -> None:
    """The last rollouts sleep while the others took a moment: a rate from the others would
    say a fraction of a second, for as long as they sleep."""
    async with live_eval([row()] * 4 + [row(**IN_FLIGHT)] * 2) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            # A throughput sample (every 5 s) gives the ETA its rate.
            await until(pilot, lambda: "done/5s" in strip(app), timeout=15)
            await until(pilot, lambda: "2 running long" in strip(app))
            assert "ETA —" in strip(app) and not eta_number(app)


async def run_first(
    live_eval: LiveFactory, rows: list[dict[str, object]], **request: object
) -> None:
    """A first invocation of the run, to its end."""
    async with live_eval(rows, **request) as first:
        await first.source.session.run()


async def interrupted_with_one_in_flight(
    live_eval: LiveFactory, rows: list[dict[str, object]]
) -> None:
    """A first invocation, stopped once every row but the last (asleep) has its result (its
    source's run: its control socket closes with it)."""
    async with live_eval(rows) as first:
        session = first.source.session
        running = asyncio.ensure_future(first.source.run())
        await eventually(lambda: len(session.results) == len(rows) - 1, "the others finished")
        await session.interrupt(cancel_in_flight=True)
        await running


async def test_a_resumed_run_counts_no_rate_from_the_results_it_carried_over(
    live_eval: LiveFactory,
) -> None:
    """Three items finished before the resume: the rate and the ETA are this session's, so
    `ETA —` while its only item runs, and the sparkline's first bucket stays empty."""
    rows = [row(), row(), row(), row(**IN_FLIGHT)]
    await interrupted_with_one_in_flight(live_eval, rows)
    async with live_eval(rows) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "running 1" in strip(app))
            await until(pilot, lambda: "done/5s" in strip(app), timeout=15)
            said = strip(app)
            assert "3/4" in said and "ETA —" in said and not eta_number(app)
            # Every bucket at the bottom: nothing finished in this session.
            assert re.search(r"done/5s ▁+ failures", said), said


async def test_a_resumed_runs_chips_and_failures_count_the_run_with_this_sessions_share(
    live_eval: LiveFactory,
) -> None:
    """Two successes and a failure carried over: the chips count them beside `3/4` (not
    `success 0`, `failures none`), and say how many are on this session's board: what the
    status filter shows."""
    rows = [row(), row(), row(**{"raise": "runtime"}), row(**IN_FLIGHT)]
    await interrupted_with_one_in_flight(live_eval, rows)
    async with live_eval(rows) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "running 1" in strip(app))
            said = strip(app)
            assert "3/4" in said
            assert "success 2 (0 now)" in said and "failure 1 (0 now)" in said, said
            assert "failures agent_error 1" in said, said
            await pilot.press("4")  # the success chip's filter: what its `now` says
            await until(pilot, lambda: not app.table.order)


async def test_a_retry_failed_run_counts_the_items_it_runs_again_as_not_done(
    live_eval: LiveFactory,
) -> None:
    """The failed item (its workflow outlived its deadline) runs again: the bar and the count
    do not call it done meanwhile."""
    rows = [row(), row(), row(sleep=3)]
    await run_first(live_eval, rows, agent_timeout_sec=1.5)
    async with live_eval(rows, agent_timeout_sec=1.5, retry_failed=True) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "running 1" in strip(app))
            said = strip(app)
            assert "2/3" in said and "3/3" not in said


async def test_while_the_run_is_paused_the_eta_says_so(live_eval: LiveFactory) -> None:
    async with live_eval([row()] * 4, max_in_flight=1) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("P")
            await until(pilot, lambda: "not dispatched 4" in strip(app))
            assert "ETA — run paused (P resumes)" in strip(app)


def test_the_eta_says_when_nothing_finished_for_the_whole_rate_window() -> None:
    """Items finished, then none for a minute: the strip says so (not the last time it
    foresaw, nor `ETA —` as before anything finished)."""
    summary = SummaryStrip()
    summary.sample_throughput(0)  # the baseline
    summary.sample_throughput(2)
    for _ in range(RATE_WINDOWS - 1):
        summary.sample_throughput(2)
    assert not summary.stalled()  # one window of the minute still holds the two
    summary.sample_throughput(2)
    assert summary.stalled() and summary.quiet_sec() == RATE_WINDOWS * THROUGHPUT_WINDOW_SEC
    fresh = SummaryStrip()
    fresh.sample_throughput(0)
    for _ in range(RATE_WINDOWS + 1):
        fresh.sample_throughput(0)
    assert not fresh.stalled()  # nothing finished yet: `ETA —`, no stall to tell
