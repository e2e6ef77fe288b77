"""The waterfall of one rollout (issue 26) from a real run: a live eval of the demo workflow
(one model call through the run's gateway to the stub model) against a real server_stub, its
Waterfall tab in the full view (`d`, 5), and the same rollout's waterfall in a replay of the
run's recording and on a dashboard attached to the run, which agree with the live one on
every segment: the client's wait for admission too (the recording keeps when the rollout
was sent, `sent_t`; the control socket sends `submitted`)."""

from __future__ import annotations

from core.eval.attach.client import ControlClient
from core.eval.timing.waterfall import Segment, Waterfall, waterfall
from server_stub.demo import MultiplyWorkflow
from tests.polling import eventually
from tests.tui.helpers import LiveFactory, board_view, make_app, text_of, until
from tests.tui.recordings import played_to_the_end
from tests.tui.test_attach import running
from tui.app import create_app
from tui.screens.distributions import DistributionsScreen
from tui.screens.rollout_view import RolloutViewScreen
from tui.sources.attached import AttachedSource

#: transitions.jsonl and calls.jsonl keep times to the millisecond.
RECORDED_TO = 0.002


def shape(model: Waterfall) -> list[tuple[object, ...]]:
    """What a waterfall says besides its times."""
    return [
        (s.lane, s.kind, s.label, s.source, s.skipped, s.status, s.tokens) for s in model.segments
    ]


def times(model: Waterfall) -> list[float]:
    """Where each segment starts and ends on its axis."""
    return [moment for s in model.segments for moment in (s.start, s.end)]


async def test_a_live_rollouts_waterfall_is_its_tab_and_its_replay_draws_the_same(
    live_eval: LiveFactory,
) -> None:
    rows = [{"user_prompt": "What is 6 * 7?", "ground_truth": "42", "metadata": {}}]
    async with live_eval(rows, workflow=MultiplyWorkflow) as live:
        app = make_app(live)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: len(app.board) == 1 and next(iter(app.board)).finished)
            rollout_id = live.row_id(0)
            record = app.board.records[rollout_id]
            live_model = waterfall(record, app.now())
            # Sent, then admitted: the client's wait is the first row, from the axis' start.
            admission = live_model.segments[0]
            assert (admission.kind, admission.start) == ("admission", 0.0)
            assert admission.end == record.transitions[0].at - record.submitted_at > 0
            calls = [s for s in live_model.segments if s.kind == "call"]
            assert len(calls) == record.model.calls == 1
            assert calls[0].status == 200 and calls[0].tokens == record.model.tokens
            running = next(s for s in live_model.segments if s.label == "running")
            assert running.start <= calls[0].start and calls[0].end <= live_model.length
            assert live_model.segments[-1] == Segment(
                "server", "terminal", "success", live_model.length, live_model.length
            )
            # The board has the row before the table's next repaint shows it.
            await until(pilot, lambda: rollout_id in app.table.order)
            app.table.move_cursor_to(rollout_id)
            await pilot.press("d", "5")
            await until(pilot, lambda: isinstance(app.screen, RolloutViewScreen))
            tab = text_of(app.screen.query_one("#view-waterfall-body"))
            assert "admission" in tab and "client wait" in tab
            assert "call #1" in tab and " 200" in tab and "◆ at " in tab
            await pilot.press("escape")
    replay = played_to_the_end(live.folder / "transitions.jsonl")
    replayed = waterfall(replay.board.records[rollout_id], replay.clock())
    assert shape(replayed) == shape(live_model)
    for recorded, seen in zip(times(replayed), times(live_model), strict=True):
        assert abs(recorded - seen) <= RECORDED_TO


async def test_an_attached_dashboard_draws_the_runs_waterfalls_and_distributions(
    live_eval: LiveFactory,
) -> None:
    rows = [{"user_prompt": f"What is 6 * {n}?", "ground_truth": "42"} for n in (7, 8)]
    async with live_eval(rows, workflow=MultiplyWorkflow) as live, running(live):
        run_board = live.source.board
        await eventually(lambda: len(run_board) == 2 and all(r.finished for r in run_board), "done")
        app = create_app(AttachedSource(await ControlClient.connect(live.folder)))
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: board_view(app.board) == board_view(run_board))
            await until(pilot, lambda: all(r.model.calls == 1 for r in app.board))
            for rollout_id, record in run_board.records.items():
                seen = waterfall(app.board.records[rollout_id], app.now())
                ran = waterfall(record, 0.0)
                assert shape(seen) == shape(ran)
                for attached_at, run_at in zip(times(seen), times(ran), strict=True):
                    assert abs(attached_at - run_at) <= RECORDED_TO
            await pilot.press("h")
            await until(pilot, lambda: isinstance(app.screen, DistributionsScreen))
            title = text_of(app.screen.query_one("#distributions-title"))
            assert "of the 2 rollouts shown" in title
