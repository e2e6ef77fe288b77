"""The waterfall of one rollout (issue 26) from a real run: a live eval of the demo workflow
(one model call through the run's gateway to the stub model) against a real server_stub, its
Waterfall tab in the full view (`d`, 5), and the same rollout's waterfall in a replay of the
run's recording, which agrees with the live one on every segment: the client's wait for
admission too (the recording keeps when the rollout was sent, `sent_t`)."""

from __future__ import annotations

from core.eval.timing.waterfall import Segment, Waterfall, waterfall
from server_stub.demo import MultiplyWorkflow
from tests.tui.helpers import LiveFactory, make_app, text_of, until
from tests.tui.recordings import played_to_the_end
from tui.screens.rollout_view import RolloutViewScreen

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
