"""Sorting the rollout table: a key per column (again: the other way), `s` stepping through the
columns, the marker in the sorted column's header, and a click on a header."""

from __future__ import annotations

import pytest
from textual.binding import Binding

from core.rollout_record import RolloutRecord
from core.types import RolloutStatus
from tests.tui.helpers import status_line, until
from tests.tui.states import NOW, StaticSource, build_app, rollout_id, running_board
from tui.app import DashboardApp
from tui.bindings import DASHBOARD_BINDINGS
from tui.widgets.table.columns import layout_columns
from tui.widgets.table.rollout_table import RolloutTable
from tui.widgets.table.sorting import (
    SORT_COLUMNS,
    TITLES,
    Sort,
    next_sort,
    pick,
    sort_records,
)

SIZE = (160, 45)


def _reward(record: RolloutRecord) -> float | None:
    result = record.latest_result
    return result.sample.reward if result and result.sample else None


def rewards(app: DashboardApp) -> list[float | None]:
    return [_reward(app.board.records[rid]) for rid in app.table.order]


def header(app: DashboardApp) -> str:
    return app.table.render_line(0).text


def test_every_sortable_column_has_its_own_capital_key_that_no_other_binding_uses() -> None:
    keys = [sort.key for sort in SORT_COLUMNS.values()]
    assert all(len(key) == 1 and key.isupper() for key in keys)
    bound = [
        key
        for binding in DASHBOARD_BINDINGS
        if isinstance(binding, Binding)
        for key in binding.key.split(",")
    ]
    repeated = {key for key in bound if bound.count(key) > 1}
    # `p` freezes a live run's screen and pauses a replay's playback: never both at once
    # (`check_action` leaves each to its source; tests/tui/test_footer.py). No other key repeats.
    assert repeated == {"p"}, "a key bound twice"
    assert set(keys) <= set(bound) and not set(keys) & repeated
    # Every column of the table but the mark sorts.
    assert set(SORT_COLUMNS) == {key for key in TITLES if key != "mark"}


def test_a_columns_key_picks_it_then_reverses_it_and_s_steps_through_all() -> None:
    assert pick(Sort(), "reward") == Sort("reward", descending=False)  # lowest first
    assert pick(Sort(), "in_phase") == Sort("in_phase", descending=True)  # longest first
    assert pick(Sort("reward"), "reward") == Sort("reward", descending=True)
    assert pick(Sort("reward", True), "reward") == Sort("reward", descending=False)
    assert pick(Sort("reward", True), "row") == Sort("row")
    for baseline in (False, True):  # the base column is one of them with a baseline only
        seen = [Sort()]
        while len(seen) == 1 or seen[-1] != Sort():
            seen.append(next_sort(seen[-1], baseline=baseline))
        assert seen[1:-1] == [
            Sort(column, sort.descending)
            for column, sort in SORT_COLUMNS.items()
            if baseline or column != "base"
        ]


@pytest.mark.parametrize("descending", [False, True])
def test_rows_without_a_value_stay_last_and_ties_keep_the_order_submitted(
    descending: bool,
) -> None:
    board = running_board()
    records = list(board)
    ordered = sort_records(records, Sort("reward", descending), board, NOW)
    values = [_reward(record) for record in ordered]
    present = [v for v in values if v is not None]
    assert present == sorted(present, reverse=descending)
    assert values[len(present) :] == [None] * (len(values) - len(present))
    # Equal rewards, and the rows without one, in the order they were submitted (the board's).
    position = {record.rollout_id: index for index, record in enumerate(records)}
    for value in (1.0, None):
        same = [position[r.rollout_id] for r, v in zip(ordered, values, strict=True) if v == value]
        assert len(same) > 3 and same == sorted(same)


async def test_keys_sort_reverse_and_mark_the_header() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "▲" not in header(app) and "▼" not in header(app)
        await pilot.press("W")  # reward, lowest first
        shown = [v for v in rewards(app) if v is not None]
        assert shown == sorted(shown) and rewards(app)[-1] is None
        assert "reward▲" in header(app) and header(app).count("▲") == 1
        assert "sort: reward ▲" in status_line(app)
        await pilot.press("W")  # the other way
        shown = [v for v in rewards(app) if v is not None]
        assert shown == sorted(shown, reverse=True) and rewards(app)[-1] is None
        assert "reward▼" in header(app) and "sort: reward ▼" in status_line(app)
        await pilot.press("T")  # in phase: longest first, the stuck one on top
        assert app.table.order[0] == rollout_id(16)
        assert "in phase▼" in header(app) and "reward▼" not in header(app)
        await pilot.press("S")  # status: what needs a look first
        assert app.board.records[app.table.order[0]].display_status == "not_admitted"
        assert "status▲" in header(app)


async def test_the_cursor_stays_on_its_rollout_through_sorts() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.table.move_cursor_to(rollout_id(8))
        for key in ("W", "W", "O", "O", "s", "E"):
            await pilot.press(key)
            assert app.table.cursor_id == rollout_id(8)
            index = app.table.cursor_index
            assert index is not None and app.table.order[index] == rollout_id(8)


async def test_a_click_on_a_header_sorts_by_that_column_and_again_reverses() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.table
        left = 0
        for column, width in layout_columns(table.scrollable_content_region.width):
            if column.key == "tokens":
                break
            left += width
        await pilot.click(RolloutTable, offset=(left + 1, 0))
        assert app.sort == Sort("tokens", descending=True)  # the most first
        tokens = [app.board.records[rid].model.tokens for rid in table.order]
        present = [t for t in tokens if t is not None]
        assert present == sorted(present, reverse=True)
        await pilot.click(RolloutTable, offset=(left + 1, 0))
        assert app.sort == Sort("tokens", descending=False)
        assert "tokens▲" in header(app)
        await pilot.click(RolloutTable, offset=(0, 0))  # the mark column does not sort
        assert app.sort == Sort("tokens", descending=False)


async def test_a_new_rollout_takes_its_place_in_the_sorted_order() -> None:
    board = running_board()
    app = build_app(StaticSource(board, total=40))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("O", "O")  # row, the last first
        assert app.table.order[0] == rollout_id(23)
        board.observe(
            rollout_id(99),
            RolloutStatus.QUEUED,
            NOW,
            row_index=99,
            run_index=0,
            source_row_index=99,
        )
        await until(pilot, lambda: app.table.order[0] == rollout_id(99))  # a repaint
