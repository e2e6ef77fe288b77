"""The dashboard names each rollout by its dataset row, the one `--rows` selects (EVAL.md §3):
in the table, the details, the `/` filter, a re-run, the export and a replay. The results files
keep the official keys: `row_index` the position among the selected rows, `source_row_index`
the dataset's own row."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.eval.runs.files import read_jsonl
from tests.tui.helpers import SIZE, LiveFactory, details_text, make_app, row, row_text, until
from tui.app import create_app
from tui.sources.replay import ReplaySource

# Dataset rows 1 and 3 finish at once; row 4 stays in flight, so the run stays open for a re-run.
SELECTED = "1,3,4"
DATASET = [row(), row(), row(), row(), row(sleep=30)]


def source_rows(folder: Path) -> dict[str, int]:
    """The dataset row of each finished rollout, from the journal, checked against the official
    positions: the n-th selected row has row_index n."""
    events = read_jsonl(folder / "events.jsonl")
    positions = {e["source_row_index"]: e["row_index"] for e in events}
    assert positions == {source: [1, 3, 4].index(source) for source in positions}
    return {e["rollout_id"]: e["source_row_index"] for e in events}


def shown_row(line: str) -> str:
    """The row column of a table line (the first cell after the mark)."""
    return line.split(maxsplit=1)[0]


async def test_the_dashboard_shows_the_dataset_rows_that_rows_selected(
    live_eval: LiveFactory,
) -> None:
    async with live_eval(DATASET, rows=SELECTED) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(read_jsonl(live.folder / "events.jsonl")) == 2)
            await until(pilot, lambda: len(app.table.order) == 3)
            finished = source_rows(live.folder)
            (slow,) = [rid for rid in app.table.order if rid not in finished]
            expected = {**finished, slow: 4}
            await until(
                pilot,
                lambda: (
                    {rid: shown_row(row_text(app, rid)) for rid in expected}
                    == {rid: str(n) for rid, n in expected.items()}
                ),
            )
            by_row = {source_row: rollout_id for rollout_id, source_row in finished.items()}
            # The filter finds a rollout by the row it shows.
            await pilot.press("slash", *"row", "space", "1", "enter")
            assert app.table.order == [by_row[1]]
            await pilot.press("0")
            # The export names the dataset row beside the official position.
            await pilot.press("e")
            (exported,) = live.folder.parent.glob("osmosis-tui-export-*.jsonl")
            lines = [json.loads(line) for line in exported.read_text().splitlines()]
            assert {
                line["rollout_id"]: (line["row_index"], line["source_row_index"])
                for line in lines
                if line["rollout_id"] in finished
            } == {by_row[1]: (0, 1), by_row[3]: (1, 3)}
            # A re-run of dataset row 3 is dataset row 3 again.
            app.table.move_cursor_to(by_row[3])
            await pilot.press("r")
            await until(pilot, lambda: len(app.table.order) == 4)
            (again,) = [rid for rid in app.table.order if rid not in expected]
            await until(pilot, lambda: shown_row(row_text(app, again)) == "3")
            app.table.move_cursor_to(by_row[3])
            await pilot.press("enter")
            assert re.search(r"row / try +3 / 0", details_text(app))


async def test_a_replay_shows_the_dataset_rows_also_of_an_older_recording(
    live_eval: LiveFactory,
) -> None:
    async with live_eval(DATASET[:4], rows=SELECTED.rpartition(",")[0]) as live:
        await live.source.run()
    recording = live.folder / "transitions.jsonl"
    # A recording of a version that did not write the dataset row: the journal beside it says.
    older = live.folder / "older" / "transitions.jsonl"
    older.parent.mkdir()
    lines = [json.loads(line) for line in recording.read_text().splitlines()]
    for line in lines:
        line.pop("source_row_index", None)
    older.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (older.parent / "events.jsonl").write_bytes((live.folder / "events.jsonl").read_bytes())
    expected = {rid: str(n) for rid, n in source_rows(live.folder).items()}
    assert await replayed_rows(recording) == expected
    assert await replayed_rows(older) == expected


async def replayed_rows(recording: Path) -> dict[str, str]:
    """The row each rollout shows once `recording` has been replayed to its end."""
    source = ReplaySource(recording, speed=64)
    app = create_app(source, clock=source.clock, export_dir=recording.parent)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.finished and len(app.table.order) == 2)
        return {rid: shown_row(row_text(app, rid)) for rid in app.table.order}
