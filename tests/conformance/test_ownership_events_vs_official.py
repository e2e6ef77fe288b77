"""Ownership events of OUR server against those of the OFFICIAL osmosis-ai 0.3.8 server
(PROTOCOL.md §8.1): the same scenarios (tests/server/feed_scenarios.py) played against both, each
server exporting to its own OTLP/HTTP receiver on a loopback port, every record compared.

Both get the same identity through the environment and the same rollout ids, so every attribute
but `event_sequence` must be equal; the timestamps and the sequence numbers are compared by what
they must be (nanoseconds of the wall clock; a count per server process), since their values
cannot match. The official servers run in the Python 3.12 conformance venv, one per scenario
group (tests/conformance/official_server_entry.py, whose workflow and grader do what our
`Echo` and `ExactMatch` do).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from core.serving.loopback import serve_in_loop
from tests.conformance.official_servers import official_server
from tests.server import feed_scenarios as scenarios
from tests.server.otlp import LogRecord, OtlpReceiver
from tests.server.rawhttp import Wire

pytestmark = pytest.mark.conformance

IDENTITY_ENV = {
    "OSMOSIS_ROLLOUT_SERVER_ID": "server-a",
    "_OSMOSIS_ROLLOUT_NAME": "demo-server",
    "OSMOSIS_ROLLOUT_NAMESPACE": "team-ns",
}
Player = Callable[[Wire], Awaitable[dict[str, dict[str, Any]]]]
# Group -> (the official entrypoint's options, our server's options, what is played on it).
GROUPS: dict[str, tuple[list[str], dict[str, Any], Player]] = {
    "plain": (["--result-wait-timeout-sec", "1.0"], {}, scenarios.play_plain),
    "one_slot": (
        ["--backend", "one_slot", "--result-wait-timeout-sec", "1.0"],
        {"slots": 1},
        scenarios.play_one_slot,
    ),
    "short_lease": (
        ["--result-wait-timeout-sec", "0.2", "--polling-lease-timeout-sec", "0.6"],
        {"timing": scenarios.SHORT_LEASE_OPTIONS},
        scenarios.play_short_lease,
    ),
}
SCENARIO_GROUP = {
    name: group
    for group, names in (
        ("plain", scenarios.PLAIN),
        ("one_slot", scenarios.ONE_SLOT),
        ("short_lease", scenarios.SHORT_LEASE),
    )
    for name in names
}
# The one difference in what the two servers report, and why: the official LocalBackend waits
# for its concurrency slot inside `execute`, after the server has reported `running`; ours
# reports `running` once it holds the slot (README: deliberate improvements).
OFFICIAL_DIFFERENCES = {"cancel_queued": ["queued", "running", "cancelled"]}


@dataclass
class Feeds:
    ours: OtlpReceiver
    official: OtlpReceiver
    ours_finals: dict[str, dict[str, Any]]
    official_finals: dict[str, dict[str, Any]]
    started_ns: int
    ended_ns: int

    def sides(self) -> dict[str, OtlpReceiver]:
        return {"ours": self.ours, "official": self.official}


async def _play_ours(url: str) -> dict[str, dict[str, Any]]:
    finals: dict[str, dict[str, Any]] = {}
    async with AsyncExitStack() as stack:
        players = []
        for _, options, play in GROUPS.values():
            base = await stack.enter_async_context(serve_in_loop(scenarios.our_app(url, **options)))
            http = await stack.enter_async_context(httpx.AsyncClient(base_url=base))
            players.append(play(Wire(http)))
        for played in await asyncio.gather(*players):
            finals.update(played)
    return finals  # the servers have shut down: their events are flushed


async def _play_official(python: Path, workdir: Path, url: str) -> dict[str, dict[str, Any]]:
    env = {**IDENTITY_ENV, "OSMOSIS_ROLLOUT_OTLP_ENDPOINT": url}
    finals: dict[str, dict[str, Any]] = {}
    async with AsyncExitStack() as stack:
        servers = await asyncio.gather(
            *(
                stack.enter_async_context(official_server(python, group, options, workdir, env))
                for group, (options, _, _) in GROUPS.items()
            )
        )
        players = []
        for server, (_, _, play) in zip(servers, GROUPS.values(), strict=True):
            http = await stack.enter_async_context(httpx.AsyncClient(base_url=server.url))
            players.append(play(Wire(http)))
        for played in await asyncio.gather(*players):
            finals.update(played)
    return finals  # SIGTERMed: each ran its shutdown, which flushes its events


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def feeds(
    official_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Feeds]:
    workdir = tmp_path_factory.mktemp("ownership-events")
    ours, official = OtlpReceiver(), OtlpReceiver()
    with pytest.MonkeyPatch.context() as env:
        for name, value in IDENTITY_ENV.items():
            env.setenv(name, value)
        for name in ("_OSMOSIS_ROLLOUT_INSTANCE_ID", "_OSMOSIS_ROLLOUT_PREVIEW_ROOT"):
            env.delenv(name, raising=False)
        async with serve_in_loop(ours.app) as ours_url, serve_in_loop(official.app) as off_url:
            started = time.time_ns()
            ours_finals, official_finals = await asyncio.gather(
                _play_ours(ours_url), _play_official(official_python, workdir, off_url)
            )
            ended = time.time_ns()
            yield Feeds(ours, official, ours_finals, official_finals, started, ended)


def _without_sequence(record: LogRecord) -> dict[str, object]:
    return {k: v for k, v in record.attributes.items() if k != "event_sequence"}


@pytest.mark.asyncio(loop_scope="module")
async def test_both_servers_finish_every_scenario_alike(feeds: Feeds) -> None:
    for name in scenarios.EXPECTED:
        ours, official = feeds.ours_finals[name], feeds.official_finals[name]
        assert (ours["status"], ours["err_category"]) == (
            official["status"],
            official["err_category"],
        ), name


@pytest.mark.asyncio(loop_scope="module")
async def test_every_scenario_gets_the_same_statuses(feeds: Feeds) -> None:
    for name, expected in scenarios.EXPECTED.items():
        assert feeds.ours.statuses(name) == expected, name
        assert feeds.official.statuses(name) == OFFICIAL_DIFFERENCES.get(name, expected), name


@pytest.mark.asyncio(loop_scope="module")
async def test_each_record_has_the_official_attributes(feeds: Feeds) -> None:
    for name in scenarios.EXPECTED:
        official = {r.status: _without_sequence(r) for r in feeds.official.of(name)}
        for record in feeds.ours.of(name):
            assert _without_sequence(record) == official[record.status], (name, record.status)


@pytest.mark.asyncio(loop_scope="module")
async def test_each_record_has_the_official_envelope(feeds: Feeds) -> None:
    reference = feeds.official.records[0]
    for side, received in feeds.sides().items():
        assert received.records, side
        for record in received.records:
            assert record.body == reference.body == "Rollout ownership"
            assert record.severity_text == reference.severity_text == "INFO"
            assert (
                record.resource == reference.resource == {"service.name": "osmosis-rollout-server"}
            )
            # The instrumentation scope is each implementation's own module name.
            assert record.scope


@pytest.mark.asyncio(loop_scope="module")
async def test_timestamps_are_wall_clock_nanoseconds_in_order(feeds: Feeds) -> None:
    for side, received in feeds.sides().items():
        for name in scenarios.EXPECTED:
            times = [r.time_unix_nano for r in received.of(name)]
            assert times == sorted(times), (side, name)
            assert all(feeds.started_ns <= t <= feeds.ended_ns for t in times), (side, name)


def _sequences(records: list[LogRecord]) -> list[int]:
    numbers = [n for r in records if isinstance(n := r.attributes["event_sequence"], int)]
    assert len(numbers) == len(records), "event_sequence is not an integer"
    return numbers


@pytest.mark.asyncio(loop_scope="module")
async def test_event_sequences_count_the_records_of_a_process(feeds: Feeds) -> None:
    for side, received in feeds.sides().items():
        for name in scenarios.EXPECTED:
            numbers = _sequences(received.of(name))
            assert numbers == sorted(set(numbers)), (side, name)
    # Each official server process counts from 1; ours share one count in this process.
    for group in GROUPS:
        records = [
            r for r in feeds.official.records if SCENARIO_GROUP.get(str(r.rollout_id)) == group
        ]
        assert sorted(_sequences(records)) == list(range(1, len(records) + 1)), group
    ours = sorted(_sequences(feeds.ours.records))
    assert ours == list(range(ours[0], ours[0] + len(ours)))


@pytest.mark.asyncio(loop_scope="module")
async def test_neither_server_exports_keys_prompts_metadata_urls_or_errors(feeds: Feeds) -> None:
    for side, received in feeds.sides().items():
        for body in received.bodies:
            for never in scenarios.NEVER_EXPORTED:
                assert never.encode() not in body, (side, never)
