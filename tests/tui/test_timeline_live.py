"""The run timeline (`w`) on a real run against a real server_stub: the live dashboard's and
one attached to the run through its control socket. The band at now is the board's in flight,
the lane is the run's server, and pausing and changing max-in-flight put their markers on it;
the replay of the same run has those markers where its transitions.jsonl has them."""

from __future__ import annotations

from core.eval.results.transitions import read_transitions
from core.eval.timeline.model import MarkerKind
from tests.polling import eventually
from tests.tui.helpers import SIZE, LiveFactory, make_app, row, until
from tests.tui.recordings import played_to_the_end
from tests.tui.test_attach import IN_FLIGHT, attached, running
from tui.app import DashboardApp


def in_flight_now(app: DashboardApp) -> set[str]:
    pane = app.timeline_pane
    return set(pane.timeline.in_flight_at(pane.timeline.end))


async def test_a_live_runs_timeline(live_eval: LiveFactory) -> None:
    rows = [row(), row(answer="7"), row(**IN_FLIGHT), row(**IN_FLIGHT)]
    async with live_eval(rows, max_in_flight=4) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.board.counts()["running"] == 2)
            await until(pilot, lambda: sum(r.finished for r in app.board) == 2)
            await pilot.press("w")
            await until(pilot, lambda: bool(app.timeline_pane.timeline.spans))
            running_ids = {r.rollout_id for r in app.board if r.in_flight}
            await until(pilot, lambda: in_flight_now(app) == running_ids)
            assert set(app.table.order) == running_ids  # the cursor is at now
            assert app.timeline_pane.timeline.lanes() == [live.url]
            await pilot.press("escape", "P")  # the run paused, then a lower limit
            await until(pilot, lambda: app.source.dispatch().paused)  # type: ignore[union-attr]
            await pilot.press("left_square_bracket")
            await until(pilot, lambda: app.source.dispatch().max_in_flight == 3)  # type: ignore[union-attr]
            await pilot.press("w")

            def kinds() -> set[MarkerKind]:
                return {marker.kind for marker in app.timeline_pane.timeline.markers}

            await until(pilot, lambda: {MarkerKind.PAUSE, MarkerKind.LIMIT} <= kinds())
            timeline = app.timeline_pane.timeline
            assert [value for _t, value in timeline.limits] == [4, 3]
            await pilot.press("escape", "P")
            await until(pilot, lambda: MarkerKind.RESUME in kinds())
        await live.source.close()
    # The replay of the same run: its markers are where the log has them.
    replayed = played_to_the_end(live.folder / "transitions.jsonl").timeline
    logged = [
        (line["action"], line["t"])
        for line in read_transitions(live.folder / "transitions.jsonl")
        if line["kind"] == "control"
    ]
    marked = [
        (marker.kind.value if marker.kind is not MarkerKind.LIMIT else "max_in_flight", marker.t)
        for marker in replayed.markers
        if marker.kind in (MarkerKind.PAUSE, MarkerKind.RESUME, MarkerKind.LIMIT)
    ]
    assert [action for action, _ in logged] == ["pause", "max_in_flight", "resume"]
    # The recording's time counts from its first session line, as the log's `t` does.
    assert marked == logged


async def test_an_attached_dashboards_timeline(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT), row(**IN_FLIGHT), row()]) as live, running(live):
        run_board = live.source.board
        await eventually(lambda: run_board.counts()["running"] == 2, "two in flight")
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.board.counts()["running"] == 2)
            await pilot.press("w")
            expected = {r.rollout_id for r in run_board if r.in_flight}
            await until(pilot, lambda: in_flight_now(app) == expected)
            await until(pilot, lambda: set(app.table.order) == expected)
            assert app.timeline_pane.timeline.lanes() == [live.url]
            assert app.timeline_pane.timeline.limit_at(app.timeline_pane.timeline.end) == 8
