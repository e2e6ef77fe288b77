"""`osmosis-tui attach` on a headless `osmosis-tui eval` running in a process of its own: the
dashboards attached to it show what its files record, a cancel from one of them is the run's
(in transitions.jsonl), leaving one leaves the run alone, and a run that dies leaves a stale
socket that the next run of the name replaces."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
from pathlib import Path
from typing import Any

import pytest

from core.eval.attach.client import ControlActionError, ControlClient
from core.eval.attach.protocol import MAX_ACTION_IDS, SILENT_AFTER_SEC
from core.eval.dispatch_gate import DispatchState
from core.types import TERMINAL_STATUSES, RolloutStatus
from server_stub.demo import STUCK_SLEEP_SEC, demo_rows
from tests.eval.runs.command import RunningEval, start_eval
from tests.eval.runs.files import multiply_rows, pending_items, read_jsonl, run_folder, write_jsonl
from tests.eval.runs.servers import ServedDemo
from tests.eval.runs.test_interrupt import cancel_on_server
from tests.polling import eventually
from tests.tui.helpers import SIZE, board_view, counts_view, text_of, until
from tui.app import DashboardApp, create_app
from tui.screens.dialogs import ConfirmScreen, QuitScreen
from tui.sources.attached import AttachedSource
from tui.widgets.summary import RunHeader

FAST_ROWS = 4
HINT = "to watch it on the dashboard: osmosis-tui attach {name}"
ATTACH_TIMEOUT_SEC = 60.0


def start_run(
    tmp_path: Path,
    server: ServedDemo,
    name: str,
    sleeps: list[float],
    *,
    fast: int = FAST_ROWS,
    max_in_flight: int | None = None,
) -> tuple[RunningEval, Path]:
    """A headless eval of `fast` fast rows, then one row per sleep (seconds before it
    answers); every row in flight at once unless `max_in_flight` says otherwise."""
    slow = [
        {**row, "metadata": {"sleep": sleep}}
        for row, sleep in zip(multiply_rows(len(sleeps)), sleeps, strict=True)
    ]
    rows = [*multiply_rows(fast), *slow]
    dataset = write_jsonl(tmp_path / f"{name}.jsonl", rows)
    run = start_eval(
        *("--server", server.url, "--dataset-file", str(dataset), "--name", name),
        *("--max-in-flight", str(max_in_flight or len(rows)), "--headless"),
        cwd=tmp_path,
    )
    return run, run_folder(tmp_path, name)


async def served(run: RunningEval, folder: Path) -> None:
    await eventually(
        lambda: (folder / "control.sock").exists() or run.process.poll() is not None,
        "the run's control socket",
        timeout=ATTACH_TIMEOUT_SEC,
    )
    assert run.process.poll() is None, run.stderr()


async def dashboard(folder: Path, cwd: Path) -> DashboardApp:
    return create_app(AttachedSource(await ControlClient.connect(folder)), export_dir=cwd)


def slow_running(app: DashboardApp) -> list[str]:
    return [
        r.rollout_id
        for r in app.board
        if r.row_index is not None and r.row_index >= FAST_ROWS and r.status.value == "running"
    ]


def last_statuses(folder: Path) -> dict[str, str]:
    """Each rollout's latest status in transitions.jsonl (what the run observed of it)."""
    statuses: dict[str, str] = {}
    for line in read_jsonl(folder / "transitions.jsonl"):
        if line["kind"] == "status":
            statuses[line["rollout_id"]] = line["status"]
    return statuses


def view_of_files(folder: Path) -> dict[str, Any]:
    """What the run's files say it ended with: every rollout's last status and the results."""
    index = read_jsonl(folder / "index.jsonl")
    return {
        "statuses": last_statuses(folder),
        "success": sum(1 for r in index if r["status"] == "success"),
        "pending": pending_items(folder),
    }


def board_statuses(client: ControlClient) -> dict[str, str]:
    return {record.rollout_id: record.status.value for record in client.board}


async def test_dashboards_attached_to_a_headless_run_watch_it_cancel_and_detach(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    name = "watched"
    # Two slow rows: one is cancelled from a dashboard, the other ends by itself.
    run, folder = start_run(tmp_path, demo_server, name, [30, 8])
    try:
        await served(run, folder)
        # The socket is the run's owner's alone, in a folder nobody else may enter.
        sock = folder / "control.sock"
        assert stat.S_ISSOCK(os.lstat(sock).st_mode)
        assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        assert run.stderr().count(HINT.format(name=name)) == 1

        # A viewer without a screen follows the whole run, alongside the dashboards.
        follower = await ControlClient.connect(folder)
        following = asyncio.ensure_future(follower.follow())

        app = await dashboard(folder, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(slow_running(app)) == 2, timeout=ATTACH_TIMEOUT_SEC)
            target = next(r.rollout_id for r in app.board if r.row_index == FAST_ROWS)
            await until(pilot, lambda: target in app.table.order)  # the next repaint
            app.table.move_cursor_to(target)
            await pilot.press("c")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await until(
                pilot,
                lambda: app.board.records[target].status == RolloutStatus.CANCELLED,
                timeout=ATTACH_TIMEOUT_SEC,
            )
            assert [c.disposition for c in app.board.records[target].cancels] == [
                "cancelled_running"
            ]
            await pilot.press("q")  # detaches: nothing asked, the run goes on
            assert not isinstance(app.screen, QuitScreen)
            await until(pilot, lambda: not app.is_running)
        assert run.process.poll() is None, "the run goes on without the dashboard"

        # Another dashboard, attached until the run ends, sees its end banner.
        last = await dashboard(folder, tmp_path)
        async with last.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: last.end_banner.display, timeout=ATTACH_TIMEOUT_SEC)
            ending = last.source.ending
            assert ending is not None
            # The one row left is the one cancelled from the first dashboard: what it did.
            assert f"Run {name} ended with the 1 work item you cancelled" in ending.reason
            assert any(f"--name {name}" in step for step in ending.next_steps)
            # The run's commands hold in its directory, not in this viewer's.
            assert ending.next_steps[-1] == f"Run these from the run's directory: cd {tmp_path}"
            assert not last.source.can_send
            last_view = board_view(last.board)
            last_counts = counts_view(last.board)
        await following
        _, stderr = run.finish()
    finally:
        if run.process.poll() is None:
            run.send_signal(signal.SIGKILL)
            run.finish()
    assert run.returncode == 1, stderr  # the cancelled item is left pending, as official
    assert not (folder / "control.sock").exists(), "removed when the run ended"

    # The run's files: the dashboard's cancel is the run's, as if its own dashboard had sent it.
    transitions = read_jsonl(folder / "transitions.jsonl")
    requests = [t for t in transitions if t["kind"] == "cancel_request"]
    # Written when asked, then when the server answered.
    assert [(t["rollout_id"], t.get("disposition")) for t in requests] == [
        (target, None),
        (target, "cancelled_running"),
    ]
    files = view_of_files(folder)
    assert files["statuses"][target] == "cancelled"
    assert files == {"statuses": files["statuses"], "success": FAST_ROWS + 1, "pending": 1}

    # What the viewers ended with is what the files say.
    assert follower.ending is not None and follower.ending.reason == ending.reason
    assert board_statuses(follower) == files["statuses"]
    assert all(RolloutStatus(s) in TERMINAL_STATUSES for s in files["statuses"].values())
    assert board_view(follower.board) == last_view
    assert counts_view(follower.board) == last_counts
    assert last_counts["success"] == files["success"]
    assert last_counts["cancelled"] == 1
    assert last_counts["total"] == len(files["statuses"])


def dispatch_of(client: ControlClient) -> DispatchState:
    state = client.dispatch
    assert state is not None, "the run reports its dispatch"
    return state


def control_logged(folder: Path) -> list[str]:
    """logs.txt's `[control]` lines, without their time stamps."""
    lines = (folder / "logs.txt").read_text().splitlines()
    return [line.split(" ", 1)[1] for line in lines if " [control] " in line]


async def test_viewers_of_a_headless_run_pause_resize_and_requeue_its_dispatch(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    name = "steered"
    # Row 0 ends at once; rows 1-3 hold the three places until the run is stopped; rows 4-6
    # wait for a place.
    run, folder = start_run(
        tmp_path, demo_server, name, [60, 60, 60, 1, 1, 1], fast=1, max_in_flight=3
    )
    try:
        await served(run, folder)
        steering = await ControlClient.connect(folder)
        watcher = await ControlClient.connect(folder)
        following = [asyncio.ensure_future(c.follow()) for c in (steering, watcher)]
        await eventually(
            lambda: dispatch_of(watcher).in_flight == 3 and len(watcher.board) == 4,
            "row 0 done, rows 1-3 in flight",
            timeout=ATTACH_TIMEOUT_SEC,
        )
        done = next(r.rollout_id for r in watcher.board if r.row_index == 0)
        await eventually(lambda: watcher.board.records[done].finished, "row 0 finished")
        steady = DispatchState(paused=False, max_in_flight=3, in_flight=3)
        await eventually(lambda: dispatch_of(steering) == steady, "the same for both viewers")

        # Paused, then room for two more: none is sent.
        await steering.pause()
        assert dispatch_of(steering).paused, "the answer brings the dispatch"
        assert await steering.set_max_in_flight(5) == 5
        assert dispatch_of(steering) == DispatchState(paused=True, max_in_flight=5, in_flight=3)
        await eventually(lambda: dispatch_of(watcher).max_in_flight == 5, "the other viewer")
        assert dispatch_of(watcher).paused
        for _ in range(10):  # longer than rows 4-6 take, were one of them sent
            await asyncio.sleep(0.2)
            assert len(watcher.board) == 4 and dispatch_of(watcher).in_flight <= 3
        # Lowered below what is in flight: nothing is cancelled.
        assert await steering.set_max_in_flight(2) == 2
        await eventually(lambda: dispatch_of(watcher).max_in_flight == 2, "the other viewer")
        assert not [r for r in watcher.board if r.cancels]

        # Requeued while paused: cancelled on its server, its item waits for the resume.
        old = next(r.rollout_id for r in watcher.board if r.row_index == 1)
        new = await steering.requeue(old)
        assert new != old
        await eventually(
            lambda: watcher.board.records[old].status == RolloutStatus.CANCELLED,
            "the requeued rollout cancelled",
        )
        assert watcher.board.records[old].requeued_as == new
        await eventually(lambda: dispatch_of(watcher).in_flight == 2, "its place freed")
        assert new not in watcher.board.records, "paused: not sent yet"

        # What the run cannot do is refused, and the run goes on as it was.
        for refused in (done, old):
            with pytest.raises(ControlActionError) as answer:
                await steering.requeue(refused)
            assert str(answer.value) == (
                f'rollout "{refused}" is no work item\'s attempt in flight'
            )
        assert run.process.poll() is None
        assert dispatch_of(steering) == DispatchState(paused=True, max_in_flight=2, in_flight=2)

        # Resumed with room for one: the requeued item goes again, under its new id.
        assert await steering.set_max_in_flight(3) == 3
        await steering.resume()
        assert not dispatch_of(steering).paused
        await eventually(
            lambda: new in watcher.board.records and watcher.board.records[new].in_flight,
            "the item sent again",
            timeout=ATTACH_TIMEOUT_SEC,
        )
        again = watcher.board.records[new]
        assert (again.row_index, again.run_index) == (1, 0)
        await eventually(lambda: dispatch_of(watcher).in_flight == 3, "three in flight again")
        assert not dispatch_of(watcher).paused and len(watcher.board) == 5

        run.send_signal(signal.SIGINT)  # cancels what is in flight, then ends
        await asyncio.gather(*following)
        _, stderr = run.finish()
    finally:
        if run.process.poll() is None:
            run.send_signal(signal.SIGKILL)
            run.finish()
    assert run.returncode == 1, stderr
    assert watcher.ending is not None and "interrupted" in watcher.ending.reason

    # Each action is the run's, recorded as its own dashboard's keys record them.
    transitions = read_jsonl(folder / "transitions.jsonl")
    assert [(t["action"], t.get("value")) for t in transitions if t["kind"] == "control"] == [
        ("pause", None),
        ("max_in_flight", 5),
        ("max_in_flight", 2),
        ("max_in_flight", 3),
        ("resume", None),
    ]
    requeued = {"new_rollout_id": new, "rollout_id": old, "row_index": 1, "run_index": 0}
    requeues = [{k: v for k, v in t.items() if k != "t"} for t in transitions]
    assert [t for t in requeues if t["kind"] == "requeue"] == [{"kind": "requeue", **requeued}]
    cancels = [t for t in transitions if t["kind"] == "cancel_request" and t["rollout_id"] == old]
    assert cancels[-1]["disposition"] == "cancelled_running"
    logged = control_logged(folder)
    # Cancels (the requeue's, and the interrupt's at the end) are logged as every cancel is.
    cancel_lines = ("INFO [control] cancel asked", "INFO [control] its server answered the cancel")
    cancel_logged = [line for line in logged if line.startswith(cancel_lines)]
    assert len([line for line in cancel_logged if old in line]) == 2
    assert [line for line in logged if line not in cancel_logged] == [
        "INFO [control] dispatch paused: no new work item is sent; those in flight go on "
        '{"in_flight":3}',
        'INFO [control] max in flight 3 -> 5 {"max_in_flight":5,"requested":5}',
        'INFO [control] max in flight 5 -> 2 {"max_in_flight":2,"requested":2}',
        "INFO [control] work item requeued: its rollout is cancelled and the item runs again "
        "under a new id " + json.dumps(requeued, separators=(",", ":"), sort_keys=True),
        'INFO [control] max in flight 2 -> 3 {"max_in_flight":3,"requested":3}',
        "INFO [control] dispatch resumed",
    ]
    # The cancelled attempt is not the item's result: row 1 has none, under either id.
    index = read_jsonl(folder / "index.jsonl")
    assert [(r["row_index"], r["status"]) for r in index] == [(0, "success")]


async def test_an_action_naming_a_rollout_again_and_again_is_carried_out_once_and_bounded(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    name = "repeated"
    # One slow row, cancelled from a viewer: the run then ends by itself.
    run, folder = start_run(tmp_path, demo_server, name, [60], fast=0)
    try:
        await served(run, folder)
        viewer = await ControlClient.connect(folder)
        following = asyncio.ensure_future(viewer.follow())
        await eventually(lambda: [r for r in viewer.board if r.in_flight], "the slow row in flight")
        target = next(iter(viewer.board.records))

        # Past the bound, however few rollouts it names, an action is refused: nothing done.
        too_many = [target] * (MAX_ACTION_IDS + 1)
        for action in (viewer.cancel, viewer.untrack):
            with pytest.raises(ControlActionError) as refused:
                await action(too_many)
            assert str(refused.value).endswith(
                f"names {MAX_ACTION_IDS + 1} rollout ids; an action names at most "
                f"{MAX_ACTION_IDS} (send them in pieces)"
            )
        assert run.process.poll() is None
        assert viewer.board.records[target].in_flight

        # Within it, an id named a thousand times is cancelled once.
        assert await viewer.cancel([target] * 1000) == {target: "cancelled_running"}
        await following
        _, stderr = run.finish()
    finally:
        if run.process.poll() is None:
            run.send_signal(signal.SIGKILL)
            run.finish()
    assert run.returncode == 1, stderr  # the cancelled item is left pending
    transitions = read_jsonl(folder / "transitions.jsonl")
    requests = [t for t in transitions if t["kind"] == "cancel_request"]
    assert [(t["rollout_id"], t.get("disposition")) for t in requests] == [
        (target, None),
        (target, "cancelled_running"),
    ]
    assert not [t for t in transitions if t["kind"] == "untrack"]
    assert last_statuses(folder) == {target: "cancelled"}


async def test_a_killed_run_leaves_a_stale_socket_that_its_next_run_replaces(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    name = "killed"
    run, folder = start_run(tmp_path, demo_server, name, [30])
    slow: set[str] = set()
    try:
        await served(run, folder)
        viewer = await ControlClient.connect(folder)
        following = asyncio.ensure_future(viewer.follow())
        await eventually(
            lambda: [r for r in viewer.board if r.row_index == FAST_ROWS and r.in_flight],
            "the slow row in flight",
        )
        slow = {r.rollout_id for r in viewer.board if r.row_index == FAST_ROWS}
        run.send_signal(signal.SIGKILL)
        run.finish()
        await following
        source = AttachedSource(viewer)
        ending = source.ending
        assert ending is not None and ending.reason.startswith(f"Lost run {name}")
        assert viewer.ending is None and viewer.lost is not None
        assert (folder / "control.sock").exists(), "SIGKILL leaves it behind"

        # The next run of the name: the stale socket is replaced, a viewer attaches again.
        run, _ = start_run(tmp_path, demo_server, name, [30])
        await served(run, folder)
        await eventually(lambda: HINT.format(name=name) in run.stderr(), "the hint")
        again = await ControlClient.connect(folder)
        following = asyncio.ensure_future(again.follow())
        await eventually(
            lambda: [r for r in again.board if r.row_index == FAST_ROWS and r.in_flight],
            "the slow row in flight again",
        )
        slow |= {r.rollout_id for r in again.board if r.row_index == FAST_ROWS}
        run.send_signal(signal.SIGINT)  # cancels what is in flight, then ends
        await following
        _, stderr = run.finish()
        assert run.returncode == 1, stderr
        assert again.ending is not None and "interrupted" in again.ending.reason
    finally:
        if run.process.poll() is None:
            run.send_signal(signal.SIGKILL)
            run.finish()
        if slow:
            cancel_on_server(demo_server, slow)  # the killed run's is still on the server
    assert not (folder / "control.sock").exists()


def start_stuck_demo(tmp_path: Path, name: str) -> tuple[RunningEval, Path]:
    """The zero-setup demo, headless, on its stuck rows only: its server is the run's own."""
    rows = enumerate(demo_rows())
    stuck = [str(n) for n, r in rows if r["metadata"].get("sleep") == STUCK_SLEEP_SEC]
    run = start_eval("--headless", "--rows", ",".join(stuck), "--name", name, cwd=tmp_path)
    return run, run_folder(tmp_path, name)


@pytest.mark.parametrize("launched", [True, False], ids=["launched", "external"])
async def test_a_killed_runs_servers_are_no_longer_shown_as_watched(
    tmp_path: Path, demo_server: ServedDemo, launched: bool
) -> None:
    """Nobody watches a run's servers once its process is gone: the attached dashboard's dot
    is hollow, and a server the run launched (it dies with the run) reads `stopped`."""
    name = "killed"
    if launched:
        run, folder = start_stuck_demo(tmp_path, name)
    else:
        run, folder = start_run(tmp_path, demo_server, name, [30])
    running: set[str] = set()
    try:
        await served(run, folder)
        app = await dashboard(folder, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            header = app.query_one(RunHeader)
            await until(pilot, lambda: in_flight(app), timeout=ATTACH_TIMEOUT_SEC)
            running = in_flight(app)
            await until(pilot, lambda: "● 127.0.0.1:" in text_of(header))
            run.send_signal(signal.SIGKILL)
            run.finish()
            await until(pilot, lambda: app.end_banner.display, timeout=ATTACH_TIMEOUT_SEC)
            await until(pilot, lambda: "○ 127.0.0.1:" in text_of(header))
            shown = text_of(header)
            assert "●" not in shown, shown
            assert ("stopped" in shown) is launched, shown
    finally:
        if run.process.poll() is None:
            run.send_signal(signal.SIGKILL)
            run.finish()
        if running and not launched:
            cancel_on_server(demo_server, running)  # the killed run's is still on the server


def in_flight(app: DashboardApp) -> set[str]:
    return {r.rollout_id for r in app.board if r.status == RolloutStatus.RUNNING}


async def test_a_stopped_run_is_said_to_be_silent_and_heard_again_once_it_goes_on(
    tmp_path: Path,
) -> None:
    """A run stopped with SIGSTOP keeps its socket open and says nothing: the attached
    dashboard says so instead of a clock that runs on, and stops saying it once the run is
    continued (nothing changing, a live run still says so every `HEARTBEAT_SEC`)."""
    name = "stopped"
    run, folder = start_stuck_demo(tmp_path, name)
    try:
        await served(run, folder)
        app = await dashboard(folder, tmp_path)
        async with app.run_test(size=(160, 24)) as pilot:
            header = app.query_one(RunHeader)
            await until(pilot, lambda: in_flight(app), timeout=ATTACH_TIMEOUT_SEC)
            # Its stuck rows change nothing for a while: the heartbeats alone keep it heard.
            await pilot.pause(SILENT_AFTER_SEC + 1)
            assert "no word from the run" not in text_of(header)
            run.send_signal(signal.SIGSTOP)
            await until(pilot, lambda: "no word from the run for" in text_of(header))
            assert not app.source.finished  # silent, not gone: the socket is still open
            run.send_signal(signal.SIGCONT)
            await until(pilot, lambda: "no word from the run" not in text_of(header))
    finally:
        run.send_signal(signal.SIGCONT)
        if run.process.poll() is None:
            run.send_signal(signal.SIGKILL)
            run.finish()
