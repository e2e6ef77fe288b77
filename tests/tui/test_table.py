"""The Line-API rollout table: column layout per width, and repaints limited to changed rows."""

from __future__ import annotations

from typing import Any

import pytest

from core.rollout_record import CancelRequest
from core.types import RolloutStatus
from tests.tui.helpers import row_text, status_line, text_of
from tests.tui.states import (
    NOW,
    StaticSource,
    build_app,
    finished_board,
    rollout_id,
    running_board,
)
from tui.widgets.phase_track import phase_track
from tui.widgets.table import rollout_table
from tui.widgets.table.columns import COLUMNS, layout_columns, row_cells
from tui.widgets.table.rollout_table import RolloutTable
from tui.widgets.table.sorting import Sort


@pytest.mark.parametrize("width", [40, 56, 78, 88, 98, 109, 158, 240])
def test_columns_fit_the_width(width: int) -> None:
    layout = layout_columns(width)
    keys = [column.key for column, _ in layout]
    assert sum(w for _, w in layout) <= max(width, sum(c.width for c in COLUMNS if not c.drop))
    assert {"row", "rollout", "status", "phases"} <= set(keys)
    if width >= 98:  # a 100-column terminal, less the scrollbar: all but try, total, tokens
        assert {"in_phase", "reward", "model", "error", "flags"} <= set(keys)
    if width == 98:  # and there a cancel's answer is not cut
        widths = {column.key: given for column, given in layout}
        assert widths["flags"] > len("cancelled_running")
    if width >= 78:  # an 80-column terminal: the model's call (why is it stuck?) before the
        # error (its category is in the details; the status is red already)
        assert {"in_phase", "reward", "model", "flags"} <= set(keys)
    if width >= sum(column.width for column in COLUMNS):
        assert keys == [column.key for column in COLUMNS if column.key != "base"]
        assert sum(w for _, w in layout) == width  # the spare width is used, not wasted


def test_no_column_is_ever_cut_and_the_phase_track_always_shows() -> None:
    for width in range(15, 241):
        layout = layout_columns(width)
        assert sum(given for _, given in layout) <= width, width
        assert {"mark", "row", "phases"} <= {column.key for column, _ in layout}
    # Beside the details pane at 100 columns: what needs an eye before the error's category.
    assert [column.key for column, _ in layout_columns(55)][-1] == "flags"


@pytest.mark.parametrize("size", [(80, 24), (70, 24), (100, 30)])
async def test_with_the_details_open_every_phase_track_is_whole(size: tuple[int, int]) -> None:
    app = build_app(StaticSource(running_board(), total=40))
    async with app.run_test(size=size) as pilot:
        await pilot.press("enter")
        await pilot.pause()
        assert app.details.display
        table = app.table
        visible = table.scrollable_content_region.width  # the scrollbar covers the rest
        for rollout_id in table.order[: table.size.height - 1]:
            drawn = row_text(app, rollout_id)[:visible]
            track = phase_track(app.board.records[rollout_id]).plain
            assert track in drawn, (drawn, track)


async def test_a_change_repaints_only_its_row(monkeypatch: pytest.MonkeyPatch) -> None:
    board = finished_board(200)  # nothing in flight: the once-a-second tick has no work
    app = build_app(StaticSource(board, total=200))
    rendered: list[str] = []
    render_row = RolloutTable._render_row

    def counting(self: RolloutTable, record: Any, base: Any) -> Any:
        rendered.append(record.rollout_id)
        return render_row(self, record, base)

    monkeypatch.setattr(RolloutTable, "_render_row", counting)
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause(0.5)
        visible = len(rendered)
        assert 0 < visible < 40  # only the rows on screen were ever drawn
        rendered.clear()
        await pilot.pause(0.7)  # two repaint periods without changes
        assert rendered == []
        target = f"{3:032x}"
        for _ in range(500):  # a burst on one rollout: one repaint of one line
            board.observe(target, RolloutStatus.SUCCESS, NOW)
        off_screen = f"{150:032x}"
        board.observe(off_screen, RolloutStatus.SUCCESS, NOW)
        await pilot.pause(0.5)
        assert rendered == [target]


async def test_rows_on_the_board_before_the_app_starts_are_shown() -> None:
    app = build_app(StaticSource(running_board(), total=40))
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        assert len(app.table.order) == len(app.board) == 24
        assert app.table.cursor_id == app.table.order[0]


async def test_a_click_moves_the_cursor_to_that_row() -> None:
    app = build_app(StaticSource(running_board(), total=40))
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        await pilot.click(RolloutTable, offset=(20, 3))  # line 0 is the header
        chosen = app.table.order[2]
        assert app.table.cursor_id == chosen
        await pilot.click(RolloutTable, offset=(20, 0))  # a header sorts, the cursor stays
        assert app.table.cursor_id == chosen


async def test_the_cursor_stays_in_view_when_a_filter_is_cleared() -> None:
    app = build_app(StaticSource(finished_board(200), total=200))
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"row", "space", *"150", "enter")
        table = app.table
        assert table.order == [f"{150:032x}"] and table.cursor_id == f"{150:032x}"
        await pilot.press("0")
        top = int(table.scroll_offset.y)
        assert table.cursor_index == 150
        assert top <= 150 < top + table.size.height - 1
        assert table.rollout_at(150 - top + 1) == f"{150:032x}"


async def test_the_filters_and_sort_are_app_reactives_that_reselect_the_rows() -> None:
    app = build_app(StaticSource(running_board(), total=40))
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        app.filter_statuses = frozenset({"queued"})
        queued = [rid for rid in app.table.order if app.board.records[rid].status.value == "queued"]
        assert app.table.order == queued and len(queued) == 2
        assert "filter: status queued" in status_line(app)
        app.filter_statuses = None
        app.sort = Sort("status")  # never admitted first, successes last
        assert len(app.table.order) == 24
        assert app.board.records[app.table.order[0]].display_status == "not_admitted"
        assert app.board.records[app.table.order[-1]].display_status == "success"
        assert "sort: status" in status_line(app) and "filter" not in status_line(app)


def test_a_cancel_that_failed_leaves_the_row_in_its_status_not_cancelling() -> None:
    board = running_board()
    record = board.records[rollout_id(17)]  # running
    record.cancels += (CancelRequest(requested_at=NOW - 1.0),)
    cells = row_cells(record, board, NOW, marked=False)
    assert cells["status"][0] == "cancelling…"  # asked, no answer yet
    record.cancels[-1].error = "ConnectError: connection refused"
    cells = row_cells(record, board, NOW, marked=False)
    assert cells["status"][0] == "running"
    assert "cancel failed" in cells["flags"][0]


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light", "nord"])
async def test_dim_columns_are_the_themes_muted_text(theme: str) -> None:
    """The try, id and total columns are context: quieter than the other cells, yet readable
    on the theme's background (not the #ffffff of an unblended `$text-muted`)."""
    board = finished_board(3)
    app = build_app(StaticSource(board, total=3))
    app.theme = theme
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        table = app.table
        strip = table.render_line(1)
        colours = {
            segment.text.strip(): segment.style.color
            for segment in strip
            if segment.style and segment.text.strip()
        }
        dim = colours[f"{0:032x}"[:10]]
        muted = table.get_component_rich_style("rollout-table--dim").color
        text, background = table.rich_style.color, table.rich_style.bgcolor
        assert dim is not None and text is not None and background is not None
        assert dim == muted
        assert 60 < _distance(dim, background) < _distance(text, background)


def _distance(one: Any, other: Any) -> float:
    (r1, g1, b1), (r2, g2, b2) = one.get_truecolor(), other.get_truecolor()
    return float(((r1 - r2) ** 2 + (g1 - g2) ** 2 + (b1 - b2) ** 2) ** 0.5)


async def test_the_scrollbar_thumb_is_whole_cells_wherever_it_is() -> None:
    """Over many rows the thumb is a cell or two; drawn in eighths of a cell it was a lone
    `▅` beside the rows, which read as a stray glyph rather than a scrollbar."""
    app = build_app(StaticSource(finished_board(240), total=240))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.table
        scrollbar = table.vertical_scrollbar
        assert scrollbar.display and scrollbar.region.width == 1
        for _ in range(12):
            drawn = text_of(scrollbar)
            assert set(drawn) <= {" ", "\n"}, drawn
            await pilot.press("pagedown")
            await pilot.pause()
        assert int(table.scroll_offset.y) > 100  # it went down the list meanwhile


@pytest.mark.parametrize("opening", ["l", "slash"], ids=["event log", "filter bar"])
async def test_the_cursor_stays_in_view_when_the_table_gets_shorter(opening: str) -> None:
    app = build_app(StaticSource(finished_board(60), total=60))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.table
        await pilot.press("end")  # the cursor on the last line in view
        await pilot.press(opening)
        await pilot.pause()
        assert table.size.height < 18
        top = int(table.scroll_offset.y)
        assert table.cursor_index == 59
        assert top <= 59 < top + table.size.height - 1
        assert table.rollout_at(59 - top + 1) == f"{59:032x}"


async def test_escape_leaves_the_filter_bar_then_clears_the_filter() -> None:
    app = build_app(StaticSource(finished_board(30), total=30))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        bar, table = app.filter_bar, app.table
        await pilot.press("slash", *"row", "space", *"12")
        assert bar.has_focus and table.order == [f"{12:032x}"]
        await pilot.press("escape")  # out of the bar: the filter stays, and the bar shows it
        assert table.has_focus and bar.display
        assert app.filter_text == "row 12" and len(table.order) == 1
        await pilot.press("escape")  # again: the text filter goes
        assert app.filter_text == "" and bar.value == "" and not bar.display
        assert len(table.order) == 30
        await pilot.press("slash", "escape")  # nothing typed: the bar closes at once
        assert table.has_focus and not bar.display


async def test_a_costly_reorder_by_a_change_waits_for_a_tick_and_the_users_never_does() -> None:
    """Re-sorting a big table at every change batch or every second took two thirds of a
    core at 100,000 rows: a costly reorder made by a change waits (the row repaints in place)
    until a tick finds it due; the user's own sort is made at once."""
    app = build_app(StaticSource(running_board(), total=40))
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        app.sort = Sort("status")
        table = app.table
        last = table.order[-1]  # a success: successes sort last
        assert app.board.records[last].display_status == "success"
        table._reorder_cost = 10.0  # as if the last reorder took 10 s: the next waits 100 s
        table.apply_changes([last], [])
        assert table.order[-1] == last and table._reorder_due
        table._reordered_at -= 100.0  # the wait is over: the next tick reorders
        table.tick()
        assert not table._reorder_due
        table._reorder_cost = 10.0
        app.sort = Sort("status", descending=True)  # the user's: at once
        assert app.board.records[table.order[0]].display_status == "success"


async def test_the_rendered_rows_kept_are_bounded_however_far_the_rows_scroll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paging through a finished run, whose rows never change again: the table keeps the rows
    rendered last, not every row it ever drew."""
    monkeypatch.setattr(rollout_table, "STRIPS_KEPT", 40)
    app = build_app(StaticSource(finished_board(240), total=240))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.table
        for _ in range(12):
            await pilot.press("pagedown")
            await pilot.pause()
            assert len(table._strips) <= 40
        assert int(table.scroll_offset.y) > 100
        # What is on the screen is drawn as ever, the rows evicted long ago included.
        await pilot.press("home")
        await pilot.pause()
        first = f"{0:032x}"
        assert first[:10] in row_text(app, first)
