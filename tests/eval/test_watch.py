"""`osmosis-tui watch`'s session (issue 27, item 1): the rollouts a server gives another client,
seen from that server's ownership events alone.

Real parts: server_stub served by uvicorn on loopback with its OTLP exporter pointed at a
running `WatchSession`, driven by our `RolloutClient` (the watch sends it nothing); the watch
cancels on the server; its folder is played back by the replay.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.client import RolloutClient
from core.eval.events.ownership import OwnershipEvent
from core.eval.servers.launcher import free_port
from core.eval.servers.pool import RolloutServerSlot, ServerPool
from core.eval.timeline.followed import BoardTimeline
from core.eval.timeline.recorded import timeline_of_recording
from core.eval.watch import FleetCanceller, WatchPlan, WatchSession
from core.handle import RolloutHandle
from core.serving.loopback import serve_in_loop
from core.types import CancelRolloutsResponse, RolloutStatus
from server_stub import LocalBackend, create_rollout_server
from tests.polling import eventually
from tests.server.plugins import Echo, ExactMatch
from tui.sources.replay import ReplaySource

RUN_TAGS = {"run_id": "run-7", "run_name": "nightly"}
FULL = ["queued", "running", "grading", "success"]


@dataclass
class Watched:
    session: WatchSession
    client: RolloutClient
    url: str

    async def send(self, rollout_id: str, sleep: float, **options: Any) -> RolloutHandle:
        return await self.client.run_rollout_async(
            [{"role": "user", "content": "What is 6 * 7?"}],
            "http://127.0.0.1:9/v1",
            rollout_id,
            metadata={"sleep": sleep, "osmosis_observability": RUN_TAGS},
            **options,
        )


@asynccontextmanager
async def watching(folder: Path, *, with_server: bool = True) -> AsyncIterator[Watched]:
    """A watch on a free port, a server that sends it its events, and a client of that server
    that is not the watch's; with `with_server`, the watch knows the server (`--server`)."""
    port = free_port()
    server = create_rollout_server(
        backend=LocalBackend(workflow=Echo, grader=ExactMatch),
        configure_logging=False,
        result_wait_timeout_sec=0.3,
        otlp_endpoint=f"http://127.0.0.1:{port}",
    )
    async with serve_in_loop(server) as url:
        session = WatchSession(
            WatchPlan(
                events_port=port,
                servers=(url,) if with_server else (),
                stuck_after_sec=1.0,
                output=folder,
            )
        )
        running = asyncio.ensure_future(session.run())
        await eventually(lambda: session.started or running.done(), "the watch to listen")
        assert not running.done()
        client = RolloutClient(url=url)
        try:
            yield Watched(session, client, url)
        finally:
            await client.aclose()
            session.stop()
            await running


def statuses(session: WatchSession, rollout_id: str) -> list[str]:
    record = session.board.records.get(rollout_id)
    return [] if record is None else [mark.status.value for mark in record.timeline()]


async def test_every_rollout_shows_with_its_server_phases_and_a_hung_one_is_cancelled(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "watch"
    async with watching(folder) as watched:
        session = watched.session
        done = [await watched.send(f"quick-{n}", 0.0) for n in range(2)]
        ungraded = await watched.send("ungraded", 0.0, grade=False)
        hung = await watched.send("hung", 300.0)
        for handle in [*done, ungraded]:
            await handle.wait_for_completion()
        await eventually(
            lambda: [statuses(session, f"quick-{n}") for n in range(2)] == [FULL, FULL], "phases"
        )
        await eventually(
            lambda: statuses(session, "ungraded") == ["queued", "running", "success"], "no grade"
        )
        record = session.board.records["quick-0"]
        # Every phase is the server's word, with its own clock; nothing of a result.
        assert {mark.source for mark in record.timeline()} == {"server"}
        assert all(mark.server_time is not None for mark in record.timeline())
        assert record.latest_result is None and record.reported_by is not None
        assert record.reported_by.run_name == "nightly" and record.reported_by.run_id == "run-7"
        assert record.server == record.reported_by.server_id
        # The hung one runs on, and is flagged stuck once it outlasts --stuck-after.
        await eventually(lambda: statuses(session, "hung") == ["queued", "running"], "running")
        await eventually(lambda: "hung" in session.board.stuck_ids(), "the stuck flag")
        assert [r.rollout_id for r in session.board.select(text="nightly")] == [
            "quick-0",
            "quick-1",
            "ungraded",
            "hung",
        ]
        # The watch cancels it on the server; the client that sent it sees it end there.
        answers = await session.board.cancel_on_server(["hung"])
        assert answers == {"hung": "cancelled_running"}
        await hung.wait_for_completion()
        assert hung.status == RolloutStatus.CANCELLED
        await eventually(lambda: session.board.records["hung"].finished, "the cancelled event")
        counts = session.board.counts()
        assert (counts["success"], counts["cancelled"], counts["stuck"]) == (3, 1, 0)
        shown = {r.rollout_id: statuses(session, r.rollout_id) for r in session.board}
        # The run timeline (w) spans each from its server's first report to its last.
        live = BoardTimeline(session.board).update(time.monotonic())
        outcomes = {span.rollout_id: span.outcome for span in live.spans.values()}
        spans = {rid: (span.end is not None) for rid, span in live.spans.items()}

    # The replay of the watch's folder shows the same rows, phases and cancel.
    replay = ReplaySource(folder)
    replay.to_end()
    assert {r.rollout_id: [m.status.value for m in r.timeline()] for r in replay.board} == shown
    ended = {"quick-0": "success", "quick-1": "success", "ungraded": "success"}
    assert outcomes == {**ended, "hung": "cancelled"} and all(spans.values())
    recorded = timeline_of_recording(replay.events)
    assert {span.rollout_id: span.outcome for span in recorded.spans.values()} == outcomes
    replayed = replay.board.records["hung"]
    assert replayed.status == RolloutStatus.CANCELLED
    assert [c.disposition for c in replayed.cancels] == ["cancelled_running"]
    assert replayed.reported_by is not None and replayed.reported_by.run_name == "nightly"
    assert replay.warnings == []
    # Counted as the watch counted: rollouts that ended, no work items, no results.
    progress = replay.progress()
    assert (progress.done, progress.total, progress.pass_rate) == (4, 4, None)
    assert replay.ending is not None and "4 of 4 rollouts ended" in replay.ending.reason


async def test_without_a_server_to_ask_nothing_can_be_cancelled(tmp_path: Path) -> None:
    async with watching(tmp_path / "w", with_server=False) as watched:
        session = watched.session
        hung = await watched.send("hung", 300.0)
        await eventually(lambda: "hung" in session.board.records, "the rollout")
        record = session.board.records["hung"]
        assert not session.board.can_cancel(record)
        assert await session.board.cancel_on_server(["hung"]) == {}
        await watched.client.cancel_rollout("hung")
        await hung.wait_for_completion()


class _Answering:
    """A server's client that answers a cancel as told (or fails), and counts what it got."""

    def __init__(self, disposition: str | None) -> None:
        self.disposition = disposition
        self.asked: list[str] = []

    async def cancel_rollout(self, rollout_id: str) -> CancelRolloutsResponse:
        self.asked.append(rollout_id)
        if self.disposition is None:
            raise OSError("connection refused")
        return CancelRolloutsResponse(dispositions={rollout_id: self.disposition})


def _slot(url: str, disposition: str | None, instance_id: str | None = None) -> RolloutServerSlot:
    # As the pool's probe leaves it: the /health body, and the instance_id read from it.
    slot = RolloutServerSlot(url=url, client=_Answering(disposition))  # type: ignore[arg-type]
    if instance_id is not None:
        slot.health = {"instance_id": instance_id}
        slot.instance_id = instance_id
    return slot


def _asked(slot: RolloutServerSlot) -> list[str]:
    client = slot.client
    assert isinstance(client, _Answering)
    return client.asked


async def test_a_cancel_goes_to_the_reporting_server_when_its_health_names_it() -> None:
    own = _slot("http://a", "cancelled_running", instance_id="srv-a")
    other = _slot("http://b", "not_found", instance_id="srv-b")
    answer = await FleetCanceller([own, other], "srv-a", "r1").cancel_rollout("r1")
    assert answer.dispositions == {"r1": "cancelled_running"}
    assert (_asked(own), _asked(other)) == (["r1"], [])


@pytest.mark.parametrize(
    ("dispositions", "said"),
    [
        (("not_found", "cancelled_queued", None), "cancelled_queued"),
        (("not_found", None), "not_found"),
    ],
)
async def test_otherwise_every_known_server_is_asked(
    dispositions: tuple[str | None, ...], said: str
) -> None:
    slots = [_slot(f"http://s{n}", d) for n, d in enumerate(dispositions)]
    answer = await FleetCanceller(slots, "unknown-server", "r1").cancel_rollout("r1")
    assert answer.dispositions == {"r1": said}
    assert all(_asked(slot) == ["r1"] for slot in slots)


async def test_a_cancel_no_server_answered_is_an_error() -> None:
    with pytest.raises(OSError, match="connection refused"):
        await FleetCanceller([_slot("http://a", None)], "x", "r1").cancel_rollout("r1")


def test_the_plan_never_shows_its_token() -> None:
    token = "plan-token-0123456789"
    plan = WatchPlan(events_host="0.0.0.0", events_token=token)
    assert token not in repr(plan) and token not in str(plan)
    assert WatchSession(plan).endpoint == "http://0.0.0.0:4318"


async def test_two_servers_rollouts_of_one_id_have_a_row_each_and_cancel_apart() -> None:
    # Rows are keyed by server and rollout id: a second server's rollout of an id already
    # reported gets `<id>@<server_id>`, and its cancel sends the id itself to that server.
    a = _slot("http://a", "not_found", instance_id="srv-a")
    b = _slot("http://b", "cancelled_running", instance_id="srv-b")
    session = WatchSession(WatchPlan(events_port=0))
    assert session.pool is None
    session.pool = ServerPool([a, b])
    now = time.time()
    for server_id in ("srv-a", "srv-b"):
        session.heard(OwnershipEvent("same", server_id, RolloutStatus.RUNNING, 1, now, 1.0))
    assert list(session.board.records) == ["same", "same@srv-b"]
    assert [r.reported_by.server_id for r in session.board if r.reported_by] == ["srv-a", "srv-b"]
    answers = await session.board.cancel_on_server(["same@srv-b"])
    assert answers == {"same@srv-b": "cancelled_running"}
    assert (_asked(a), _asked(b)) == ([], ["same"])


async def test_the_watch_finds_its_servers_as_an_eval_does(tmp_path: Path) -> None:
    # --servers-file (and a --server name of several addresses) as in `eval`: the servers
    # listed are read, and followed as the file changes.
    async with AsyncExitStack() as stack:
        a, b = [
            await stack.enter_async_context(
                serve_in_loop(
                    create_rollout_server(
                        backend=LocalBackend(workflow=Echo, grader=ExactMatch),
                        configure_logging=False,
                    )
                )
            )
            for _ in range(2)
        ]
        listing = tmp_path / "servers.txt"
        listing.write_text(f"{a}\n")
        session = WatchSession(WatchPlan(events_port=0, servers_file=listing))
        running = asyncio.ensure_future(session.run())
        try:
            await eventually(lambda: [s.url for s in session.slots] == [a], "the listed server")
            pool = session.pool
            assert pool is not None
            listing.write_text(f"{a}\n{b}\n")
            await pool.refresh()  # what its watch does every few seconds
            assert [slot.url for slot in session.slots] == [a, b]
        finally:
            session.stop()
            await running
