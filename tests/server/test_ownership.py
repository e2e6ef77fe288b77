"""Ownership events (PROTOCOL.md §8.1): what our server exports over OTLP/HTTP, received by a
real receiver on a loopback port."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from core.types import RolloutStatus
from server_stub.registry import RolloutRegistry
from server_stub.results import encode_result
from tests.conftest import Serve
from tests.polling import eventually
from tests.server import feed_scenarios as scenarios
from tests.server.otlp import LogRecord, OtlpReceiver
from tests.server.rawhttp import Wire

IDENTITY = {"server_id": "server-a", "server_name": "demo-server", "namespace": "team-ns"}


@pytest.fixture(autouse=True)
def identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """A known identity for the server, and no feed switched on by the environment."""
    monkeypatch.setenv("OSMOSIS_ROLLOUT_SERVER_ID", IDENTITY["server_id"])
    monkeypatch.setenv("_OSMOSIS_ROLLOUT_NAME", IDENTITY["server_name"])
    monkeypatch.setenv("OSMOSIS_ROLLOUT_NAMESPACE", IDENTITY["namespace"])
    for name in ("_OSMOSIS_ROLLOUT_INSTANCE_ID", "OSMOSIS_ROLLOUT_OTLP_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("_OSMOSIS_ROLLOUT_PREVIEW_ROOT", raising=False)


@pytest.fixture
async def receiver(serve: Serve) -> AsyncIterator[tuple[OtlpReceiver, str]]:
    """A receiver and its base URL; it outlives the servers a test starts (their last flush)."""
    collected = OtlpReceiver()
    async with serve(collected.app) as url:
        yield collected, url


def _expected_attributes(rollout_id: str, status: str) -> dict[str, object]:
    return {
        "event": "rollout.ownership",
        "rollout_id": rollout_id,
        **IDENTITY,
        **scenarios.RUN_TAGS,
        "status": status,
    }


def _check_records(received: OtlpReceiver, started_ns: int, ended_ns: int) -> None:
    """What every record must be, whatever its rollout."""
    sequences = [n for n in received.sequences() if isinstance(n, int)]
    assert len(sequences) == len(received.records)
    # One count per process: servers export in their own batches, so only the numbers are
    # consecutive, not their arrival order across servers.
    assert sorted(sequences) == list(range(min(sequences), min(sequences) + len(sequences)))
    for record in received.records:
        assert record.body == "Rollout ownership"
        assert record.severity_text == "INFO"
        assert record.resource == {"service.name": "osmosis-rollout-server"}
        assert started_ns <= record.time_unix_nano <= ended_ns
    for body in received.bodies:
        for never in scenarios.NEVER_EXPORTED:
            assert never.encode() not in body


def _check_rollout(records: list[LogRecord], rollout_id: str, expected: list[str]) -> None:
    assert [r.status for r in records] == expected, rollout_id
    for record in records:
        attributes = dict(record.attributes)
        attributes.pop("event_sequence")
        assert attributes == _expected_attributes(rollout_id, str(record.status))
    sequences = [n for r in records if isinstance(n := r.attributes["event_sequence"], int)]
    assert len(sequences) == len(records)
    assert sequences == sorted(sequences), rollout_id
    times = [r.time_unix_nano for r in records]
    assert times == sorted(times)


async def test_each_status_of_a_rollout_is_one_event_in_order(
    serve: Serve, receiver: tuple[OtlpReceiver, str]
) -> None:
    received, url = receiver
    started = time.time_ns()
    async with (
        serve(scenarios.our_app(url)) as plain,
        serve(scenarios.our_app(url, slots=1)) as one_slot,
        serve(scenarios.our_app(url, timing=scenarios.SHORT_LEASE_OPTIONS)) as short_lease,
        httpx.AsyncClient(base_url=plain) as plain_http,
        httpx.AsyncClient(base_url=one_slot) as one_slot_http,
        httpx.AsyncClient(base_url=short_lease) as short_lease_http,
    ):
        finals = {
            **await scenarios.play_plain(Wire(plain_http)),
            **await scenarios.play_one_slot(Wire(one_slot_http)),
            **await scenarios.play_short_lease(Wire(short_lease_http)),
        }
    ended = time.time_ns()  # the servers have shut down: everything is flushed
    assert {name: final["status"] for name, final in finals.items()} == {
        name: expected[-1] for name, expected in scenarios.EXPECTED.items()
    }
    assert finals["lease_expiry"]["err_category"] == "lease_expired"
    _check_records(received, started, ended)
    for name, expected in scenarios.EXPECTED.items():
        _check_rollout(received.of(name), name, expected)
    assert len(received.records) == sum(map(len, scenarios.EXPECTED.values()))


async def test_events_reach_the_receiver_while_the_server_runs(
    serve: Serve, receiver: tuple[OtlpReceiver, str]
) -> None:
    received, url = receiver
    async with serve(scenarios.our_app(url)) as base, httpx.AsyncClient(base_url=base) as http:
        wire = Wire(http)
        await scenarios.admit(wire, "live", meta={"sleep": 60})
        await scenarios.until_status(wire, "live", "running")
        # Batched about a second apart, not held until shutdown.
        await eventually(lambda: received.statuses("live") == ["queued", "running"], "2 events")
        await scenarios.cancel(wire, "live")
        await wire.until_terminal("live")


async def test_the_environment_turns_the_feed_on_at_server_start(
    serve: Serve, receiver: tuple[OtlpReceiver, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    received, url = receiver
    app = scenarios.our_app(None)  # created before the variable is set: read when the server starts
    monkeypatch.setenv("OSMOSIS_ROLLOUT_OTLP_ENDPOINT", url + "/")
    async with serve(app) as base, httpx.AsyncClient(base_url=base) as http:
        wire = Wire(http)
        await scenarios.admit(wire, "from-env")
        await wire.until_terminal("from-env")
    assert received.statuses("from-env") == scenarios.EXPECTED["success"]


@pytest.mark.parametrize("keyword", [None, ""])
async def test_off_unless_configured(
    serve: Serve,
    receiver: tuple[OtlpReceiver, str],
    monkeypatch: pytest.MonkeyPatch,
    keyword: str | None,
) -> None:
    received, url = receiver
    if keyword == "":
        # An empty keyword turns the feed off whatever the environment says.
        monkeypatch.setenv("OSMOSIS_ROLLOUT_OTLP_ENDPOINT", url)
    async with serve(scenarios.our_app(keyword)) as base, httpx.AsyncClient(base_url=base) as http:
        wire = Wire(http)
        await scenarios.admit(wire, "quiet")
        await wire.until_terminal("quiet")
    assert received.records == []


async def test_an_endpoint_that_is_not_a_url_is_refused_with_a_warning(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="server_stub.ownership"):
        app = scenarios.our_app("not a url")
        async with serve(app) as base, httpx.AsyncClient(base_url=base) as http:
            wire = Wire(http)
            await scenarios.admit(wire, "no-url")
            _, final = await wire.until_terminal("no-url")
    assert final["status"] == "success"
    assert "not an http(s) URL" in caplog.text


async def test_text_values_that_are_unusable_are_left_out(
    serve: Serve, receiver: tuple[OtlpReceiver, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    received, url = receiver
    monkeypatch.setenv("_OSMOSIS_ROLLOUT_NAME", "tab\there")
    monkeypatch.setenv("OSMOSIS_ROLLOUT_NAMESPACE", "   ")
    tags = {"run_id": "x" * 513, "run_name": "a\nb"}
    async with serve(scenarios.our_app(url)) as base, httpx.AsyncClient(base_url=base) as http:
        wire = Wire(http)
        await wire.admit("bare", metadata={"osmosis_observability": tags})
        await wire.until_terminal("bare")
        await wire.admit("longest", metadata={"osmosis_observability": {"run_id": "y" * 512}})
        await wire.until_terminal("longest")
    assert received.statuses("bare") == scenarios.EXPECTED["success"]
    for record in received.of("bare"):
        assert set(record.attributes) == {
            "event",
            "rollout_id",
            "server_id",
            "status",
            "event_sequence",
        }
    assert received.of("longest")[0].attributes["run_id"] == "y" * 512


async def test_an_unusable_rollout_or_server_id_suppresses_the_events(
    serve: Serve, receiver: tuple[OtlpReceiver, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    received, url = receiver
    long_id = "r" * 513
    async with serve(scenarios.our_app(url)) as base, httpx.AsyncClient(base_url=base) as http:
        wire = Wire(http)
        await wire.admit(long_id)
        _, final = await wire.until_terminal(long_id)
        await wire.admit("short")
        await wire.until_terminal("short")
    assert final["status"] == "success"
    assert received.of(long_id) == []
    assert received.statuses("short") == scenarios.EXPECTED["success"]

    monkeypatch.setenv("OSMOSIS_ROLLOUT_SERVER_ID", "bad\tid")
    async with serve(scenarios.our_app(url)) as base, httpx.AsyncClient(base_url=base) as http:
        wire = Wire(http)
        await wire.admit("anonymous")
        _, final = await wire.until_terminal("anonymous")
    assert final["status"] == "success"
    assert received.of("anonymous") == []


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("failure", ["refused", "http 500"])
async def test_export_failures_touch_neither_admission_nor_results(
    serve: Serve, failure: str
) -> None:
    refusing = OtlpReceiver(answer_status=500)
    async with serve(refusing.app) as refusing_url:
        url = f"http://127.0.0.1:{_closed_port()}" if failure == "refused" else refusing_url
        started = time.monotonic()
        async with serve(scenarios.our_app(url)) as base, httpx.AsyncClient(base_url=base) as http:
            wire = Wire(http)
            finals = await scenarios.play_plain(wire)
            assert (await http.get("/health")).json()["lifecycle"]["accepting_rollouts"]
        # Flushing at shutdown gives up after its timeouts instead of holding the exit.
        assert time.monotonic() - started < 20
    assert {name: final["status"] for name, final in finals.items()} == {
        name: scenarios.EXPECTED[name][-1] for name in scenarios.PLAIN
    }
    assert refusing.records == []


async def test_a_rollout_that_never_ran_still_gets_its_terminal_event(
    serve: Serve, receiver: tuple[OtlpReceiver, str]
) -> None:
    received, url = receiver
    # One slot, kept by a rollout that is polled; the one waiting for it is not, and its
    # lease lapses before it ever ran.
    app = scenarios.our_app(url, slots=1, timing=scenarios.SHORT_LEASE_OPTIONS)
    async with serve(app) as base, httpx.AsyncClient(base_url=base) as http:
        wire = Wire(http)
        await scenarios.admit(wire, "holder", meta={"sleep": 60})
        await scenarios.admit(wire, "never-ran", meta={"sleep": 60})
        for _ in range(8):  # about 1.6 s of polls, each held 0.2 s at most
            assert (await wire.poll("holder")).json()["status"] == "running"
        _, final = await wire.until_terminal("never-ran")
        await scenarios.cancel(wire, "holder")
        await wire.until_terminal("holder")
    assert final["err_category"] == "lease_expired"
    assert received.statuses("never-ran") == ["queued", "failure"]
    assert received.statuses("holder") == ["queued", "running", "cancelled"]


async def test_a_task_cancelled_before_its_first_step_is_reported_cancelled() -> None:
    seen: list[RolloutStatus] = []
    registry = RolloutRegistry(
        result_wait_timeout_sec=1.0,
        polling_lease_timeout_sec=5.0,
        result_retention_sec=0.0,
        backend_cancel=lambda _rollout_id: None,
        encode_result=encode_result,
    )
    entry, _ = registry.register("early", seen.append)
    task = asyncio.get_running_loop().create_task(asyncio.sleep(60))
    registry.bind(entry, task)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    registry.close()
    assert seen == [RolloutStatus.QUEUED, RolloutStatus.CANCELLED]
