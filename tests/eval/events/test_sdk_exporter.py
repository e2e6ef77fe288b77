"""The OpenTelemetry SDK's own OTLP/HTTP log exporter, as a rollout server uses it (PROTOCOL.md
§8.1: batching, protobuf bodies), talking to a real receiver on a loopback port.

The SDK and the exporter are the server side's dependencies (server_stub publishes with them);
without them installed these tests are skipped, the rest of the receiver's are not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk._logs")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http._log_exporter")

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from core.eval.events.ownership import OwnershipEvent
from core.eval.events.receiver import LOGS_PATH, EventReceiver
from core.types import RolloutStatus
from tests.eval.events.otlp import ownership_attributes

Publish = Callable[..., None]


@pytest.fixture
async def provider_for() -> AsyncIterator[Callable[..., LoggerProvider]]:
    """`provider_for(receiver, **exporter_options)`: a LoggerProvider exporting to it the way
    a rollout server does; shut down (in a thread: the exporter blocks) after the test."""
    made: list[LoggerProvider] = []

    def make(receiver: EventReceiver, **options: Any) -> LoggerProvider:
        provider = LoggerProvider(
            resource=Resource.create({"service.name": "osmosis-rollout-server"})
        )
        exporter = OTLPLogExporter(endpoint=receiver.endpoint + LOGS_PATH, timeout=3, **options)
        provider.add_log_record_processor(
            BatchLogRecordProcessor(exporter, schedule_delay_millis=50, max_export_batch_size=128)
        )
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await asyncio.to_thread(provider.shutdown)


def publish(provider: LoggerProvider, attributes: dict[str, Any], time_ns: int) -> None:
    provider.get_logger("osmosis.rollout.ownership").emit(
        timestamp=time_ns, body="Rollout ownership", attributes=attributes
    )


async def flush(provider: LoggerProvider) -> bool:
    # The exporter sends with blocking I/O; the receiver answers on this loop meanwhile.
    return await asyncio.to_thread(provider.force_flush, 10_000)


LIFECYCLE = ("queued", "running", "grading", "success")


@pytest.mark.parametrize(
    "compression", [Compression.NoCompression, Compression.Gzip, Compression.Deflate]
)
async def test_the_sdk_exporter_delivers_a_rollouts_whole_lifecycle(
    receiver: EventReceiver,
    events: list[OwnershipEvent],
    provider_for: Callable[..., LoggerProvider],
    compression: Compression,
) -> None:
    provider = provider_for(receiver, compression=compression)
    base_ns = time.time_ns()
    for sequence, status in enumerate(LIFECYCLE, start=1):
        attributes = ownership_attributes(
            "rollout-1", status, sequence, server_name="demo", run_id="run-9", run_name="nightly"
        )
        publish(provider, attributes, base_ns + sequence * 250_000_000)
    assert await flush(provider)
    assert [(e.status, e.event_sequence) for e in events] == [
        (RolloutStatus(status), n) for n, status in enumerate(LIFECYCLE, start=1)
    ]
    assert [e.server_time for e in events] == [
        (base_ns + n * 250_000_000) / 1e9 for n in range(1, 5)
    ]
    first = events[0]
    assert (first.rollout_id, first.server_id, first.server_name) == ("rollout-1", "srv-a", "demo")
    assert (first.namespace, first.run_id, first.run_name) == (None, "run-9", "nightly")
    assert (receiver.accepted, receiver.dropped, receiver.refused) == (4, 0, 0)


async def test_many_rollouts_arrive_in_batches_and_other_records_are_dropped(
    receiver: EventReceiver,
    events: list[OwnershipEvent],
    provider_for: Callable[..., LoggerProvider],
) -> None:
    provider = provider_for(receiver)
    base_ns = time.time_ns()
    for n in range(300):
        publish(provider, ownership_attributes(f"r{n}", "queued", n + 1), base_ns + n)
        if n % 100 == 0:
            publish(provider, {"event": "something.else"}, base_ns + n)
    assert await flush(provider)  # a partial success is still a successful export
    assert [e.rollout_id for e in events] == [f"r{n}" for n in range(300)]
    assert (receiver.accepted, receiver.dropped, receiver.refused) == (300, 3, 0)


async def test_a_refused_export_is_the_exporters_failure_and_nothing_more(
    events: list[OwnershipEvent],
    provider_for: Callable[..., LoggerProvider],
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with EventReceiver(events.append, max_body_bytes=64) as tiny:
        provider = provider_for(tiny)
        publish(provider, ownership_attributes(), time.time_ns())
        await flush(provider)
        assert (tiny.accepted, tiny.refused) == (0, 1)
        assert events == []
    assert "413" in caplog.text  # the exporter's own report; 413 is not retried
