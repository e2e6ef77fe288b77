"""The servers panel (`V`, issue 27 item 4): a line per server with what the run did there, and
`d` to drain a server (no new work item is sent there; what is in flight finishes) and undrain
it, journaled as the other controls. Against a live eval over a real server_stub; the replay
plays the drain back as a marker and a note."""

from __future__ import annotations

from collections import Counter

from rich.text import Text

from core.eval.results.transitions import read_transitions
from core.eval.servers.account import server_accounts
from core.eval.timeline.model import MarkerKind
from tests.tui.helpers import SIZE, LiveFactory, make_app, row, until
from tests.tui.states import SERVER, T0, running_board
from tui.app import DashboardApp, create_app
from tui.screens.servers import ServersScreen, failures_text
from tui.sources.live import LiveSource
from tui.sources.replay import ReplaySource


def panel(app: DashboardApp) -> ServersScreen:
    screen = app.screen
    assert isinstance(screen, ServersScreen)
    return screen


def line(screen: ServersScreen) -> dict[str, str]:
    """The panel's first line, by column."""
    table = screen.table
    cells = table.get_row_at(0)
    return {
        str(column.key.value): cell.plain if isinstance(cell, Text) else str(cell)
        for column, cell in zip(table.ordered_columns, cells, strict=True)
    }


async def test_v_shows_the_server_and_d_drains_it_until_pressed_again(
    live_eval: LiveFactory,
) -> None:
    rows = [row(sleep=0.3) for _ in range(6)]
    async with live_eval(rows, max_in_flight=2) as live:
        source = live.source
        assert isinstance(source, LiveSource)
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(app.board) >= 1)
            await pilot.press("V")
            screen = panel(app)
            url = source.servers()[0].url
            await until(pilot, lambda: line(screen)["state"] == "● accepting")
            assert line(screen)["server"] == url.removeprefix("http://")
            await pilot.press("d")
            await until(pilot, lambda: line(screen)["state"] == "● drained")
            runner = source.session.runner
            assert runner is not None
            # What was in flight finishes; nothing new is sent while it is drained.
            await until(pilot, lambda: runner.running_items == 0)
            admitted = len(app.board)
            assert admitted < len(rows) and runner.pending
            await pilot.pause(0.5)
            assert len(app.board) == admitted
            assert line(screen)["admitted"] == str(admitted)
            assert line(screen)["in_flight"] == "0"
            await pilot.press("d")
            await until(pilot, lambda: source.finished)
            assert line(screen)["admitted"] == str(len(rows))
            await pilot.press("escape")
            assert not isinstance(app.screen, ServersScreen)
    controls = [
        (line["action"], line.get("server"))
        for line in read_transitions(live.folder / "transitions.jsonl")
        if line["kind"] == "control"
    ]
    assert controls == [("drain", url), ("undrain", url)]
    logs = (live.folder / "logs.txt").read_text()
    assert f"server {url} drained: no new work item is sent there" in logs
    # The replay plays it back: a note, and a marker on its time line.
    replay = ReplaySource(live.folder)
    replay.to_end()
    assert [text for _, text in replay.notes if "drain" in text] == [
        f"server {url} drained",
        f"server {url} undrained",
    ]
    assert [m.kind for m in replay.timeline.markers_between(0, 1e9)].count(MarkerKind.DRAIN) == 2


async def test_a_replay_lists_its_rollouts_servers_and_drains_nothing(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(), row(answer="41")]) as live:
        await live.source.run()
    replay = ReplaySource(live.folder)
    app = make_app_for(replay)
    async with app.run_test(size=SIZE) as pilot:
        replay.to_end()
        await pilot.press("V")
        screen = panel(app)
        await until(pilot, lambda: screen.table.row_count == 1 and line(screen)["admitted"] == "2")
        assert line(screen)["state"] == "○ -"
        assert screen.check_action("drain", ()) is False


def make_app_for(source: ReplaySource) -> DashboardApp:
    return create_app(source, clock=source.clock)


def test_a_servers_account_counts_what_the_board_holds() -> None:
    # running_board: 24 rollouts on one server, 95 s in; the last not admitted, two failed
    # (agent_error, timeout), six in flight (the untracked one is no longer followed), five
    # admitted within the last 10 s (at 88.0, 89.0, 91.0, 93.5 and 94.1 s).
    board = running_board()
    accounts = server_accounts(board.records.values(), now=T0 + 95.0)
    assert list(accounts) == [SERVER]
    account = accounts[SERVER]
    assert (account.admitted, account.in_flight, account.recent) == (23, 6, 5)
    assert account.admitted_per_sec == 0.5
    assert account.not_admitted == 1
    assert account.failures == Counter({"not admitted": 1, "agent_error": 1, "timeout": 1})
    assert failures_text(account) == "agent_error 1, timeout 1"
