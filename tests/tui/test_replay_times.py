"""`osmosis-tui replay` of a recording holding times that are no finite number (issue 15).

JSON readers take `Infinity`, `-Infinity`, `NaN` and `1e400` (which overflows to infinity) as
numbers; a recording edited by hand, or written by another tool, may hold them. The reader
skips such a record with a warning naming its line, and the rest plays to the end.
"""

from __future__ import annotations

from tests.tui.helpers import SIZE, LiveFactory, row, until
from tui.app import create_app
from tui.sources.replay import ReplaySource

BAD_TIMES = ["Infinity", "-Infinity", "NaN", "1e400"]


async def test_records_whose_time_is_no_finite_number_are_skipped_and_the_rest_plays(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(), row()]) as live:
        await live.source.run()  # the recording: a real eval, without a dashboard
        recorded = {r.rollout_id: r.status for r in live.source.board}
    path = live.folder / "transitions.jsonl"
    good_lines = len(path.read_text().splitlines())
    some_id = next(iter(recorded))
    bad = [
        f'{{"kind":"status","rollout_id":"{some_id}","row_index":0,"run_index":0,'
        f'"status":"running","t":{value}}}'
        for value in BAD_TIMES
    ]
    bad.append(
        f'{{"kind":"cancel_request","rollout_id":"{some_id}","row_index":0,"run_index":0,'
        '"t":1.0,"disposition":"not_found","reply_t":Infinity}'
    )
    with path.open("a") as stream:
        stream.write("".join(line + "\n" for line in bad))

    source = ReplaySource(path, speed=64)
    app = create_app(source, clock=source.clock, export_dir=path.parent)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.finished and len(app.table.order) == len(recorded))
        assert {r.rollout_id: r.status for r in app.board} == recorded
    skipped = [w for w in source.warnings if "is no finite number" in w]
    numbers = range(good_lines + 1, good_lines + len(bad) + 1)
    assert skipped == [
        *(f"{path}:{n}: skipped a record whose t is no finite number" for n in numbers[:-1]),
        f"{path}:{numbers[-1]}: skipped a record whose reply_t is no finite number",
    ]
