"""The dashboard under `--budget`: the strip shows the spend, its pace, the projected total and
the budget; dispatch pauses when the projection would pass the budget, `P` or `$` (the budget a
quarter higher) resumes it, and the run stops when the spend reaches it. A live eval of the
demo's workflow over the stub model, priced with `--price-per-mtok`; the CLI's side (exit 1, a
resume counting the spend before) is in tests/eval/runs/test_budget.py."""

from __future__ import annotations

from core.eval.cost.price import TokenPrice
from server_stub.demo import MultiplyWorkflow
from tests.tui.helpers import SIZE, LiveFactory, make_app, status_line, text_of, until
from tests.tui.recordings import played_to_the_end
from tests.tui.states import budget_source, build_app
from tests.tui.test_attach import attached, running
from tests.tui.test_control import control_lines
from tui.app import DashboardApp
from tui.widgets.summary import SummaryStrip

#: A row below costs 0.8 cents at this price (six prompt tokens, one answer token).
PRICE = TokenPrice(1000, 2000)
ROW = {"user_prompt": "What is 6 * 7?", "ground_truth": "42"}


def strip(app: DashboardApp) -> str:
    return text_of(app.query_one(SummaryStrip))


async def test_the_projection_pauses_dispatch_p_resumes_and_the_spend_stops_the_run(
    live_eval: LiveFactory,
) -> None:
    async with live_eval(
        [ROW] * 6,
        workflow=MultiplyWorkflow,
        max_in_flight=1,
        price_per_mtok=PRICE,
        budget_usd=0.02,
    ) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            # One item at 0.8 cents projects 4.8 cents for six: past the 2-cent budget.
            await until(pilot, lambda: "over budget, paused" in strip(app))
            # (The strip's last cell is cut, on main too: the budget's last digit is not read.)
            assert "projected $0.0480 of $0.020" in strip(app)
            assert "dispatch paused" in status_line(app)
            assert "would pass $0.02; dispatch pauses" in (live.folder / "logs.txt").read_text()
            await pilot.press("P")  # on anyway: the budget pauses no more
            await until(pilot, lambda: app.run_state == "ended")
            assert "$0.0240" in strip(app) and "of $0.0200 reach" in strip(app)
            # The third call reaches the budget: its item may finish first or be cancelled.
            results = len(live.source.session.results)
            assert 2 <= results <= 3, "stopped once the spend reached the budget"
    actions = [line["action"] for line in control_lines(live)]
    assert actions[:3] == ["budget_pause", "pause", "resume"]
    assert "budget_reached" in actions
    # A replay of the run says what the budget did, when it did.
    notes = [text for _t, text in played_to_the_end(live.folder).notes]
    assert "the projected spend passed the budget: dispatch paused (budget $0.02)" in notes
    assert "the spend reached the budget: the run stopped (budget $0.02)" in notes


async def test_dollar_raises_the_budget_and_lifts_its_pause(live_eval: LiveFactory) -> None:
    async with live_eval(
        [ROW] * 3,
        workflow=MultiplyWorkflow,
        max_in_flight=1,
        price_per_mtok=PRICE,
        budget_usd=0.02,
    ) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "over budget, paused" in strip(app))  # 2.4 cents > 2
            await pilot.press("dollar_sign")  # 2.5 cents: within
            await until(pilot, lambda: app.run_state == "ended")
            assert len(live.source.session.results) == 3
            assert "of $0.025" in strip(app) and "reached" not in strip(app)
    assert [(line["action"], line.get("value")) for line in control_lines(live)][:5] == [
        ("budget_pause", 2),
        ("pause", None),
        ("budget", 2),  # 2.5 cents, rounded to whole cents in the line's value
        ("budget_resume", 2),
        ("resume", None),
    ]


async def test_the_strip_shows_spend_pace_projection_and_budget() -> None:
    app = build_app(budget_source())
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        shown = strip(app)
        assert "$4.12" in shown and "/min)" in shown
        assert "projected $12.47 of $10.0" in shown
        assert "over budget, paused (P/$)" in shown
        await pilot.press("dollar_sign")
        await until(pilot, lambda: "of $12.5" in strip(app))
        assert "over budget" not in strip(app)


async def test_dollar_in_an_attached_dashboard_raises_the_run_s_budget(
    live_eval: LiveFactory,
) -> None:
    async with (
        live_eval(
            [ROW] * 3,
            workflow=MultiplyWorkflow,
            max_in_flight=1,
            price_per_mtok=PRICE,
            budget_usd=0.02,
        ) as live,
        running(live),
    ):
        app = await attached(live)
        budget = live.source.session.budget
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "over budget, paused" in strip(app))  # 2.4 cents
            await pilot.press("dollar_sign")  # through the control socket: 2.5 cents
            await until(pilot, lambda: budget.limit_usd == 0.025)
            await until(pilot, lambda: len(live.source.session.results) == 3)
    assert [line["action"] for line in control_lines(live)][:4] == [
        "budget_pause",
        "pause",
        "budget",
        "budget_resume",
    ]
