"""Follow mode (`f`, as `tail -f`: the cursor goes to each new rollout), the server filter
(`v`: one server's rollouts, the next one's, then all), and copying a rollout's id (`y`)."""

from __future__ import annotations

from core.board import RolloutBoard
from core.types import RolloutStatus
from tests.tui.helpers import status_line, until
from tests.tui.states import NOW, SERVER, StaticSource, build_app, rollout_id, running_board
from tui.sources.base import ServerView
from tui.widgets.table.rollout_table import RolloutTable
from tui.widgets.table.view import next_server

OTHER = "http://127.0.0.1:8440"
SIZE = (160, 45)


def add_rollout(board: RolloutBoard, n: int, server: str = SERVER) -> str:
    rid = rollout_id(n)
    record = board.observe(
        rid, RolloutStatus.QUEUED, NOW, row_index=n, run_index=0, source_row_index=n
    )
    record.server = server
    return rid


def in_view(table: RolloutTable, rollout: str) -> bool:
    index = table.order.index(rollout)
    top = int(table.scroll_offset.y)
    return top <= index < top + table.size.height - 1


async def test_follow_keeps_each_new_rollout_in_view_until_f_again() -> None:
    board = running_board()
    for n in range(100, 160):  # more rows than the table shows
        add_rollout(board, n)
    board.take_changes()
    app = build_app(StaticSource(board, total=200))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.table
        first = table.cursor_id
        await pilot.press("f")
        assert app.follow and "following (f stops)" in status_line(app)
        assert table.cursor_id == rollout_id(159)  # the newest
        assert in_view(table, rollout_id(159))
        newest = add_rollout(board, 160)
        await until(pilot, lambda: table.cursor_id == newest)  # a repaint
        assert in_view(table, newest)
        await pilot.press("W")  # in another order too: to the new row, where it lands
        newest = add_rollout(board, 161)
        await until(pilot, lambda: table.cursor_id == newest)
        assert in_view(table, newest)
        await pilot.press("f")
        assert not app.follow and "following" not in status_line(app)
        unfollowed = add_rollout(board, 162)
        await until(pilot, lambda: unfollowed in table.order)  # shown, and not followed
        assert table.cursor_id == newest != first


async def test_v_steps_through_the_runs_servers_then_shows_all_again() -> None:
    board = running_board()
    others = [add_rollout(board, n, OTHER) for n in (30, 31)]
    board.take_changes()
    source = StaticSource(board, total=40)
    source.server_states = [ServerView(SERVER, "accepting"), ServerView(OTHER, "accepting")]
    app = build_app(source)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("v")
        assert app.filter_server == SERVER and len(app.table.order) == 24
        assert f"filter: server {SERVER}" in status_line(app)
        await pilot.press("v")
        assert app.table.order == others and f"server {OTHER}" in status_line(app)
        added = add_rollout(board, 32, OTHER)
        add_rollout(board, 33, SERVER)
        await until(pilot, lambda: added in app.table.order)
        assert app.table.order == [*others, added], "new rollouts pass the filter too"
        await pilot.press("v")
        assert app.filter_server is None and len(app.table.order) == 28
        await pilot.press("v", "0")  # clear every filter: the server's too
        assert app.filter_server is None and "filter" not in status_line(app)


def test_the_servers_come_from_the_source_then_the_board_each_once() -> None:
    servers = [SERVER, OTHER, SERVER, "http://127.0.0.1:9"]
    assert next_server(None, servers) == SERVER
    assert next_server(SERVER, servers) == OTHER
    assert next_server(OTHER, servers) == "http://127.0.0.1:9"
    assert next_server("http://127.0.0.1:9", servers) is None
    assert next_server("http://gone", servers) == SERVER


async def test_y_copies_the_selected_rollouts_id_and_says_so() -> None:
    app = build_app()
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        app.table.move_cursor_to(rollout_id(8))
        await pilot.press("y")
        assert app.clipboard == rollout_id(8)

        def said() -> bool:
            # What the toast says (its drawn lines are not laid out yet in a headless run).
            return any(
                str(toast.render()) == f"copied {rollout_id(8)}"
                for toast in app.screen.query("Toast.-information")
            )

        await until(pilot, said)


async def test_a_cursor_move_still_queued_as_the_app_closes_is_let_go() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f")
    # Follow mode moves the cursor from a timer: such a move can reach the app once its
    # screens are gone, and must not end it with an error.
    assert not app.screen_stack
    app._cursor_moved()
