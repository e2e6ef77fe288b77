"""`osmosis-tui watch` on the dashboard (issue 27, item 1).

Live: a real server_stub on loopback sends its ownership events to a real watch, our
`RolloutClient` (not the watch) sends it rollouts, and the dashboard under Pilot shows them,
flags the hung one stuck and cancels it on the server with `c` and its confirmation; the
watch's folder replays the same. Static: the keys that send or steer are not offered, the `/`
filter finds a run's rollouts, and the run column groups them; the snapshots at 160x45 and
80x24 (`watch_states.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.widgets import Static

from core.client import RolloutClient
from core.eval.servers.launcher import free_port
from core.eval.watch import WatchPlan
from core.serving.loopback import serve_in_loop
from core.types import RolloutStatus
from server_stub import LocalBackend, create_rollout_server
from tests.server.plugins import Echo, ExactMatch, Narrating
from tests.tui.helpers import row_text, screen_lines, status_line, text_of, until
from tests.tui.watch_states import CANCELLED_HERE, STUCK, watch_app
from tui.app import create_app
from tui.bindings import help_lines
from tui.screens.dialogs import ConfirmScreen
from tui.screens.rollout_view import RolloutViewScreen
from tui.screens.transcript import TranscriptScreen
from tui.sources.replay import ReplaySource
from tui.sources.watch import WatchSource

SIZE = (160, 45)
RUN = {"run_id": "run-7", "run_name": "nightly"}


async def test_a_watch_shows_another_clients_rollouts_and_cancels_the_hung_one(
    tmp_path: Path,
) -> None:
    port = free_port()
    server = create_rollout_server(
        backend=LocalBackend(workflow=Echo, grader=ExactMatch),
        configure_logging=False,
        result_wait_timeout_sec=0.3,
        otlp_endpoint=f"http://127.0.0.1:{port}",
    )
    folder = tmp_path / "watched"
    async with serve_in_loop(server) as url:
        source = WatchSource(
            WatchPlan(events_port=port, servers=(url,), stuck_after_sec=1.0, output=folder)
        )
        app = create_app(source)
        client = RolloutClient(url=url)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: source.session.started)

                async def send(rollout_id: str, sleep: float) -> None:
                    await client.run_rollout_async(
                        [{"role": "user", "content": "What is 6 * 7?"}],
                        "http://127.0.0.1:9/v1",
                        rollout_id,
                        metadata={"sleep": sleep, "osmosis_observability": RUN},
                    )

                await send("quick-rollout", 0.0)
                await send("hung-rollout", 300.0)
                table = app.table
                await until(pilot, lambda: "quick-rollout" in table.order)
                await until(pilot, lambda: "success" in row_text(app, "quick-rollout"))
                assert "●─●─●─✔" in row_text(app, "quick-rollout")
                assert "nightly" in row_text(app, "quick-rollout")
                await until(pilot, lambda: "hung-rollout" in table.order)
                await until(pilot, lambda: "stuck" in row_text(app, "hung-rollout"))
                table.move_cursor_to("hung-rollout")
                await pilot.pause()
                assert app.check_action("cancel_server", ()) is True
                await pilot.press("c")
                assert isinstance(app.screen, ConfirmScreen)
                await pilot.press("y")
                record = source.board.records["hung-rollout"]
                # Its server's event ends it on the watch: the cancel's answer alone does not.
                await until(pilot, lambda: record.status == RolloutStatus.CANCELLED)
                assert [c.disposition for c in record.cancels] == ["cancelled_running"]
                await until(pilot, lambda: "●─●─×─⊘" in row_text(app, "hung-rollout"))
                # The server has ended it: its own client sees it cancelled there.
                answer = await client.cancel_rollout("hung-rollout")
                assert answer.dispositions == {"hung-rollout": "not_found"}
        finally:
            await client.aclose()
            await source.close()

    replay = ReplaySource(folder)
    replay_app = create_app(replay, start_work=False)
    async with replay_app.run_test(size=SIZE) as pilot:
        replay.to_end()
        replay_app.use_board(replay.board)
        await until(pilot, lambda: "●─●─×─⊘" in row_text(replay_app, "hung-rollout"))
        assert "cancelled_running" in row_text(replay_app, "hung-rollout")
        assert "●─●─●─✔" in row_text(replay_app, "quick-rollout")
        assert "nightly" in row_text(replay_app, "quick-rollout")


async def test_with_the_servers_preview_root_t_shows_a_watched_rollouts_transcript(
    tmp_path: Path,
) -> None:
    port = free_port()
    previews = tmp_path / "previews"
    server = create_rollout_server(
        backend=LocalBackend(workflow=Narrating),
        configure_logging=False,
        result_wait_timeout_sec=0.3,
        otlp_endpoint=f"http://127.0.0.1:{port}",
        preview_root=previews,
    )
    async with serve_in_loop(server) as url:
        source = WatchSource(WatchPlan(events_port=port, previews=previews))
        app = create_app(source)
        client = RolloutClient(url=url)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: source.session.started)
                await client.run_rollout_async(
                    [{"role": "user", "content": "What is 6 * 7?"}],
                    "http://127.0.0.1:9/v1",
                    "narrating",
                    metadata={"lines": 2, "sleep": 300},
                    grade=False,
                )
                await until(pilot, lambda: "narrating" in app.table.order)
                app.table.move_cursor_to("narrating")
                await pilot.press("t")
                assert isinstance(app.screen, TranscriptScreen)
                steps = app.screen.query_one("#transcript-steps", Static)
                await until(pilot, lambda: "line 2" in text_of(steps))
                assert "What is 6 * 7?" in text_of(steps)
                await client.cancel_rollout("narrating")
        finally:
            await client.aclose()
            await source.close()


async def test_the_keys_that_send_or_steer_are_not_offered() -> None:
    app = watch_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        for action in ("new_rollout", "rerun", "requeue", "pause_dispatch", "max_in_flight"):
            assert app.check_action(action, ()) is False, action
        # Sorts by the columns a watch shows, named as it shows them.
        for column in ("reward", "tokens", "model", "error"):
            assert app.check_action("sort_by", (column,)) is False, column
        sorts = dict(help_lines(app, watch=True))["O … F"]
        assert "O run" in sorts and "Y server" in sorts and "reward" not in sorts
        app.table.move_cursor_to(STUCK)
        await pilot.pause()
        assert app.check_action("cancel_server", ()) is True
        await pilot.press("d")  # the full view: whose it is, its phases, no result
        assert isinstance(app.screen, RolloutViewScreen)
        await pilot.pause()
        shown = "\n".join(line.rstrip() for line in screen_lines(app))
        assert "run nightly" in shown and "row -" not in shown
        assert "run id    r-0412" in shown and "ownership events carry statuses" in shown
        await pilot.press("escape")
        app.table.move_cursor_to(CANCELLED_HERE)
        await pilot.pause()
        assert app.check_action("cancel_server", ()) is None  # over: greyed out


async def test_the_filter_finds_a_runs_rollouts_and_the_run_column_groups_them() -> None:
    app = watch_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"grpo-step", "enter")
        await until(pilot, lambda: len(app.table.order) == 4)
        assert all(rid.startswith("c81d0e1") for rid in app.table.order)
        await pilot.press("escape")
        await pilot.press("slash", *"team-rl", "enter")  # the namespace
        await until(pilot, lambda: len(app.table.order) == 8)
        await pilot.press("escape")
        await pilot.press("slash", *"e55b2a9", "enter")  # an id's prefix
        await until(pilot, lambda: len(app.table.order) == 2)
        await pilot.press("escape")
        await until(pilot, lambda: len(app.table.order) == 10)
        await pilot.press("v")  # one server's rollouts, by the name its events give it
        await until(pilot, lambda: len(app.table.order) == 4)
        assert "server rollout-a" in status_line(app)
        await pilot.press("v")
        await until(pilot, lambda: len(app.table.order) == 6)
        await pilot.press("v")
        await until(pilot, lambda: len(app.table.order) == 10)
        await pilot.press("O")  # by run, then server: each run's rollouts together
        await until(pilot, lambda: "sort: run ▲" in status_line(app))
        runs = [app.board.records[rid].reported_by for rid in app.table.order]
        names = [by.run_name if by else None for by in runs]
        assert names == [None, None, *["grpo-step-120"] * 4, *["nightly"] * 4]


def test_watch_snapshot_wide(snap_compare: Callable[..., bool], clean_terminal: None) -> None:
    assert snap_compare(watch_app(), terminal_size=(160, 45))


def test_watch_snapshot_small(snap_compare: Callable[..., bool], clean_terminal: None) -> None:
    assert snap_compare(watch_app(), terminal_size=(80, 24))
