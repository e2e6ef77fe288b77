"""The summary strip against a live eval: the work items not dispatched yet are counted, and the
ETA knows about in-flight and stuck work (no number rather than a wrong one)."""

from __future__ import annotations

import re

from tests.tui.helpers import SIZE, LiveFactory, make_app, row, text_of, until
from tui.app import DashboardApp

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
