"""A dashboard attached to a live eval through its control socket (`osmosis-tui attach`), the
run in this process: it shows what the run's board shows, its keys act through the run, and
leaving it leaves the run alone. The acceptance tests with the run in a process of its own are
tests/eval/runs/test_attach.py."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from core.eval.attach import endpoint
from core.eval.attach.client import (
    ControlActionError,
    ControlClient,
    ControlUnavailable,
    ViewerRefused,
)
from core.eval.attach.unix_socket import socket_path
from core.eval.results.transitions import read_transitions
from core.types import RolloutStatus
from tests.polling import eventually
from tests.tui.helpers import (
    SIZE,
    Live,
    LiveFactory,
    board_view,
    counts_view,
    log_lines,
    row,
    row_text,
    running_rollout,
    status_line,
    text_of,
    until,
)
from tests.tui.test_progress import interrupted_with_one_in_flight
from tui.app import DashboardApp, create_app
from tui.bindings import help_lines
from tui.screens.dialogs import ConfirmScreen, QuitScreen
from tui.screens.servers import ServersScreen
from tui.sources.attached import AttachedSource

IN_FLIGHT = {"sleep": 30}


@asynccontextmanager
async def running(live: Live) -> AsyncIterator[asyncio.Future[None]]:
    """The live run going on in this process, its control socket served."""
    task = asyncio.ensure_future(live.source.run())
    await eventually(lambda: socket_path(live.folder).exists() or task.done(), "the socket")
    try:
        yield task
    finally:
        await live.source.close()
        await asyncio.gather(task, return_exceptions=True)


async def attached(live: Live) -> DashboardApp:
    client = await ControlClient.connect(live.folder)
    return create_app(AttachedSource(client), export_dir=live.folder.parent)


def in_flight_id(app: DashboardApp) -> str | None:
    return next((r.rollout_id for r in app.board if r.status == RolloutStatus.RUNNING), None)


async def test_an_attached_dashboard_shows_what_the_runs_board_shows(
    live_eval: LiveFactory,
) -> None:
    rows = [row(), row(answer="7"), row(**IN_FLIGHT), row(**IN_FLIGHT)]
    async with live_eval(rows) as live, running(live):
        run_board = live.source.board
        await eventually(lambda: run_board.counts()["running"] == 2, "two in flight")
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: board_view(app.board) == board_view(run_board))
            assert counts_view(app.board) == counts_view(run_board)
            assert list(app.board.records) == list(run_board.records), "in the run's order"
            # Sent a few times a second: what is overdue moves on with the clock.
            await until(pilot, lambda: app.source.progress() == live.source.progress())
            header = text_of(app.header)
            assert "live" in header and "attached" in header
            for rollout_id in run_board.records:
                assert rollout_id[:10] in row_text(app, rollout_id)


async def test_an_attached_dashboard_counts_a_resumed_runs_carried_over_results(
    live_eval: LiveFactory,
) -> None:
    """The chips and the failures line of a resumed run count what it carried over, on the
    viewer as on the run: the protocol's progress carries them."""
    rows = [row(), row(**{"raise": "runtime"}), row(**IN_FLIGHT)]
    await interrupted_with_one_in_flight(live_eval, rows)
    async with live_eval(rows) as live, running(live):
        await eventually(lambda: live.source.board.counts()["running"] == 1, "one in flight")
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.source.progress() == live.source.progress())
            said = " ".join(text_of(app.summary).split())
            assert "success 1 (0 now)" in said and "failure 1 (0 now)" in said, said
            assert "failures agent_error 1" in said, said


async def test_cancel_and_untrack_from_an_attached_dashboard_act_on_the_run(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(**IN_FLIGHT), row(**IN_FLIGHT)]) as live, running(live):
        run_board = live.source.board
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.board.counts()["running"] == 2)
            cancelled = await running_rollout(pilot, app)
            await pilot.press("c")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await until(pilot, lambda: live.server_status(cancelled) == "cancelled")
            run_record = run_board.records[cancelled]
            assert [c.disposition for c in run_record.cancels] == ["cancelled_running"]
            await until(pilot, lambda: app.board.records[cancelled].display_status == "cancelled")
            assert any("cancel requested" in line for line in log_lines(app))
            await pilot.press("down")
            untracked = app.table.cursor_id
            assert untracked is not None and untracked != cancelled
            await pilot.press("x")
            await until(pilot, lambda: run_board.records[untracked].untracked)
            assert live.server_status(untracked) is None, "nothing was sent to the server"
            await until(pilot, lambda: board_view(app.board) == board_view(run_board))
            assert app.board.counts()["untracked"] == 1


async def test_leaving_an_attached_dashboard_detaches_and_the_run_goes_on(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live, running(live) as run:
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: in_flight_id(app) is not None)
            await pilot.press("q")
            assert not isinstance(app.screen, QuitScreen), "the question is the run's own"
            await until(pilot, lambda: not app.is_running)
        await asyncio.sleep(0.5)
        assert not run.done()
        assert live.source.board.counts()["running"] == 1
        assert not live.source.session.board.records[next(iter(live.source.board.records))].cancels


async def test_a_dashboard_attached_until_the_end_shows_the_runs_end_banner(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(sleep=1.5), row()]) as live, running(live) as run:
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.end_banner.display)
            banner = " ".join(text_of(app.end_banner).split())
            assert "Run live finished" in banner
            assert app.source.finished and not app.source.can_send
            assert app.board.counts()["success"] == 2
            # The run told its viewers before it removed the socket and ended.
            await until(pilot, run.done)
            assert not socket_path(live.folder).exists(), "removed with the run's end"


async def test_an_attached_dashboard_steers_but_leaves_sending_to_the_runs_own(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live, running(live):
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await running_rollout(pilot, app)
            for action in ("new_rollout", "rerun"):
                assert app.check_action(action, ()) is False, action
            for action in ("cancel_server", "requeue", "pause_dispatch", "max_in_flight"):
                assert app.check_action(action, ()) is True, action
            keys = dict(help_lines(app))
            assert keys["P"].startswith("Pause or resume the run")
            assert keys["R"].startswith("Cancel the selected (or marked) rollouts")
            assert "n" not in keys and "r" not in keys
            await pilot.pause()  # the cursor's first move is handled before the app closes


def control_lines(live: Live) -> list[tuple[str, int | None]]:
    """The run's transitions.jsonl `control` lines: (action, value)."""
    recording = live.folder / "transitions.jsonl"
    if not recording.exists():
        return []
    lines = read_transitions(recording)
    return [(line["action"], line.get("value")) for line in lines if line["kind"] == "control"]


async def test_p_brackets_and_r_in_an_attached_dashboard_steer_the_run(
    live_eval: LiveFactory,
) -> None:
    rows = [row(**IN_FLIGHT) for _ in range(3)]
    async with live_eval(rows, max_in_flight=2) as live, running(live):
        run_board, control = live.source.board, live.source.session.control
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.board.counts()["running"] == 2)
            await until(pilot, lambda: "2 in flight, max 2" in status_line(app))

            await pilot.press("P")
            await until(pilot, lambda: "dispatch paused (P resumes)" in status_line(app))
            assert control.state().paused
            assert log_lines(app)[-1].endswith(
                "dispatch paused: no new work item is sent; those in flight go on"
            )

            await pilot.press("right_square_bracket")
            await until(pilot, lambda: "2 in flight, max 3" in status_line(app))
            assert control.state().max_in_flight == 3
            assert log_lines(app)[-1].endswith("max in flight 3")
            await asyncio.sleep(0.5)  # paused: the third item waits, though the limit allows it
            assert len(run_board) == 2 and len(live.entries) == 2

            await pilot.press("P")
            await until(pilot, lambda: log_lines(app)[-1].endswith("dispatch resumed"))
            await until(pilot, lambda: "3 in flight, max 3" in status_line(app))
            assert "dispatch paused" not in status_line(app)
            assert not control.state().paused and len(run_board) == 3

            old = await running_rollout(pilot, app)
            await pilot.press("R")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await until(pilot, lambda: run_board.records[old].requeued_as is not None)
            new = run_board.records[old].requeued_as
            assert new is not None
            said = f"requeued {old[:10]} as {new[:10]}"
            await until(pilot, lambda: log_lines(app)[-1].endswith(said))
            await until(pilot, lambda: live.server_status(old) == "cancelled")
            await until(pilot, lambda: new in app.board.records)
            again, before = app.board.records[new], app.board.records[old]
            assert (again.row_index, again.run_index) == (before.row_index, before.run_index)
            await until(pilot, lambda: "requeued" in row_text(app, old))
            assert before.requeued_as == new
            await until(pilot, lambda: "3 in flight, max 3" in status_line(app))

            await pilot.press("left_square_bracket")
            await until(pilot, lambda: "3 in flight, max 2" in status_line(app))
            assert "nothing is cancelled" in log_lines(app)[-1]
            assert sum(1 for record in run_board if record.in_flight) == 3
            await until(pilot, lambda: len(control_lines(live)) == 4)
    assert control_lines(live) == [
        ("pause", None),
        ("max_in_flight", 3),
        ("resume", None),
        ("max_in_flight", 2),
    ]
    requeues = [
        t for t in read_transitions(live.folder / "transitions.jsonl") if t["kind"] == "requeue"
    ]
    assert [(t["rollout_id"], t["new_rollout_id"]) for t in requeues] == [(old, new)]


async def test_what_the_run_refuses_an_attached_dashboard_is_said_in_its_event_log(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live, running(live):
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            old = await running_rollout(pilot, app)
            await pilot.press("R")
            assert isinstance(app.screen, ConfirmScreen)
            live.source.session.control.requeue(old)  # while the question is up, by the run
            await pilot.press("y")
            await until(pilot, lambda: "could not requeue" in log_lines(app)[-1])
            assert log_lines(app)[-1].endswith(
                f'could not requeue {old[:10]}: rollout "{old}" '
                "is no work item's attempt in flight"
            )
            await live.source.close()  # the run ends: what is asked now cannot reach it
            await until(pilot, lambda: app.source.finished)
            assert app.source.dispatch() == live.source.dispatch(), "the last one is kept"
            app.control_flow.step_limit(1)  # as if `]` had come just before the end
            await until(pilot, lambda: "max in flight" in log_lines(app)[-1])
            assert log_lines(app)[-1].endswith(
                "could not change max in flight: the run is over: nothing can be sent to it"
            )


async def test_several_viewers_each_get_every_change(live_eval: LiveFactory) -> None:
    async with live_eval([row(sleep=1.0), row(sleep=1.0), row(**IN_FLIGHT)]) as live:
        async with running(live):
            run_board = live.source.board
            first = await ControlClient.connect(live.folder)
            second = await ControlClient.connect(live.folder)
            following = [asyncio.ensure_future(c.follow()) for c in (first, second)]
            # The run's own consumer takes its batches too: nobody takes another's.
            for _ in range(20):
                run_board.take_changes()
                await asyncio.sleep(0.1)
            await eventually(lambda: run_board.counts()["success"] == 2, "two finished")
            await eventually(
                lambda: (
                    board_view(first.board) == board_view(second.board) == board_view(run_board)
                ),
                "each viewer's board as the run's",
            )
            await second.close()  # one leaves; the other goes on
            await eventually(following[1].done, "the second viewer detached")
            target = next(r.rollout_id for r in run_board if r.in_flight)
            assert await first.cancel([target]) == {target: "cancelled_running"}
            await eventually(
                lambda: first.board.records[target].display_status == "cancelled", "cancelled"
            )
        await asyncio.gather(*following)
        assert first.ending is not None and "Run live" in first.ending.reason


async def test_steering_with_bad_arguments_is_refused_clearly(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live, running(live) as run:
        client = await ControlClient.connect(live.folder)
        following = asyncio.ensure_future(client.follow())
        try:
            await eventually(lambda: client.board.counts()["running"] == 1, "the rollout sent")
            for limit in (0, -3, 2.5, "3", None, True, False):
                with pytest.raises(ControlActionError) as refused:
                    await client._request("max_in_flight", limit=limit)
                assert str(refused.value) == (
                    "limit must be a whole number of work items, at least 1 (got "
                    f"{json.dumps(limit)})"
                )
            with pytest.raises(ControlActionError, match=r"^limit must be .* \(got null\)$"):
                await client._request("max_in_flight")  # no limit at all
            for fields in ({}, {"rollout_id": 42}, {"rollout_id": ["a"]}):
                with pytest.raises(ControlActionError) as refused:
                    await client._request("requeue", **fields)
                assert str(refused.value) == "rollout_id must be the id of a rollout (a string)"
            # An id that is no work item's rollout in flight: the run's own refusal.
            with pytest.raises(ControlActionError, match="no work item's attempt in flight"):
                await client.requeue("whatever")
            # Nothing of it reached the run's controls.
            state = live.source.dispatch()
            assert state is not None and state.max_in_flight == 8 and not state.paused
            assert client.dispatch == state
        finally:
            await client.close()
            await following
        assert not run.done()
        lines = (live.folder / "logs.txt").read_text()
        assert "[control]" not in lines


async def raw_exchange(live: Live, *lines: dict[str, Any]) -> list[dict[str, Any]]:
    """Say `lines` on the run's control socket, then read what it answers until it hangs up
    (or two messages came)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(socket_path(live.folder)))
    sock.setblocking(False)
    reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 26)
    for line in lines:
        writer.write(json.dumps(line).encode() + b"\n")
    answers: list[dict[str, Any]] = []
    try:
        while len(answers) < 2 and (raw := await asyncio.wait_for(reader.readline(), 10)):
            answers.append(json.loads(raw))
    finally:
        writer.close()
    return answers


async def test_a_viewer_of_another_protocol_version_is_refused_clearly(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live, running(live):
        answers = await raw_exchange(live, {"type": "hello", "version": 99})
        assert answers == [
            {
                "type": "refused",
                "version": 1,
                "error": "this run speaks control protocol 1, the other side 99: attach with "
                "the osmosis-tui that runs it",
            }
        ]
        answers = await raw_exchange(live, {"action": "cancel", "ids": []})
        assert answers[0]["type"] == "refused"
        assert answers[0]["error"] == "the first message must be a hello"


async def test_another_users_viewer_is_refused(
    live_eval: LiveFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(endpoint, "peer_uid", lambda _sock: 4242)
    async with live_eval([row(**IN_FLIGHT)]) as live, running(live):
        with pytest.raises(ViewerRefused, match="belongs to another user"):
            await ControlClient.connect(live.folder)


async def test_nonsense_from_a_viewer_is_answered_and_the_run_goes_on(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live, running(live) as run:
        hello = {"type": "hello", "version": 1}
        answers = await raw_exchange(live, hello, {"action": "cancel", "ids": "abc"})
        assert [a["type"] for a in answers] == ["hello", "snapshot"]
        client = await ControlClient.connect(live.folder)
        following = asyncio.ensure_future(client.follow())
        try:
            with pytest.raises(ControlActionError, match="ids must be a list"):
                await client._request("cancel", ids="abc")
            with pytest.raises(ControlActionError, match="unknown action 'explode'"):
                await client._request("explode")
        finally:
            await client.close()
            await following
        assert not run.done()


async def test_attaching_to_a_folder_nobody_serves_says_so(live_eval: LiveFactory) -> None:
    async with live_eval([row()]) as live:
        live.folder.mkdir(parents=True)
        with pytest.raises(ControlUnavailable, match="no control socket"):
            await ControlClient.connect(live.folder)


async def test_the_servers_panel_of_an_attached_dashboard_drains_the_run_s_server(
    live_eval: LiveFactory,
) -> None:
    rows = [row(sleep=0.3) for _ in range(4)]
    async with live_eval(rows, max_in_flight=1) as live, running(live):
        session = live.source.session
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: session.pool is not None and len(app.board) >= 1)
            pool = session.pool
            assert pool is not None
            url = pool.slots[0].url
            await pilot.press("V")
            screen = app.screen
            assert isinstance(screen, ServersScreen)
            await until(pilot, lambda: screen.table.row_count == 1)
            await pilot.press("d")
            await until(pilot, lambda: pool.slots[0].drained)
            said = f"server {url} drained: no new work item is sent there"
            await until(pilot, lambda: any(said in line for line in log_lines(app)))
            # The run's state says so to its viewers: the panel shows it drained.
            await until(
                pilot, lambda: screen.cursor_url() == url and "drained" in row_state(screen)
            )
            await pilot.press("d")
            await until(pilot, lambda: not pool.slots[0].drained)
            await until(pilot, lambda: live.source.finished)
    actions = [
        (line["action"], line.get("server"))
        for line in read_transitions(live.folder / "transitions.jsonl")
        if line["kind"] == "control"
    ]
    assert actions == [("drain", url), ("undrain", url)]


def row_state(screen: ServersScreen) -> str:
    cell = screen.table.get_row_at(0)[1]
    return str(cell)


async def test_a_drain_of_a_server_the_run_does_not_have_is_refused(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live, running(live):
        client = await ControlClient.connect(live.folder)
        following = asyncio.ensure_future(client.follow())
        try:
            await eventually(lambda: client.board.counts()["running"] == 1, "the rollout sent")
            with pytest.raises(ControlActionError, match=r'^the run has no server "http://x\\n"$'):
                await client.drain("http://x\n", drained=True)
            with pytest.raises(ControlActionError, match="server must be the URL of a server"):
                await client._request("drain", server=7)
        finally:
            await client.close()
            await following
