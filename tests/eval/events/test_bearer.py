"""A receiver beyond loopback (`osmosis-tui watch --events-listen`, issue 27 item 2) takes
requests only with its bearer: checked on every request, before anything is read, and a
request without it (or with another) gets 401 and changes nothing.

The receiver listens on 127.0.0.2 here, standing for an address beyond 127.0.0.1 (the tests
use loopback only). The OpenTelemetry SDK's exporter, which the rollout servers publish with
(ours and the official 0.3.8's, neither passing headers of its own), sends the bearer when the
server is started with the standard `OTEL_EXPORTER_OTLP_HEADERS` or
`OTEL_EXPORTER_OTLP_LOGS_HEADERS`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from core.eval.events.ownership import OwnershipEvent
from core.eval.events.receiver import LOGS_PATH, EventReceiver
from tests.eval.events.otlp import export_request, ownership_attributes, post_protobuf, record

TOKEN = "watch-token-0123456789abcdef"


@pytest.fixture
async def guarded(events: list[OwnershipEvent]) -> AsyncIterator[EventReceiver]:
    async with EventReceiver(events.append, host="127.0.0.2", token=TOKEN) as running:
        yield running


def one_event(rollout_id: str = "r1") -> bytes:
    return export_request(record(ownership_attributes(rollout_id))).SerializeToString()


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        f"Bearer  {TOKEN}",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        TOKEN,
        "Basic x",
    ],
)
async def test_a_request_without_the_bearer_is_refused_and_changes_nothing(
    guarded: EventReceiver,
    events: list[OwnershipEvent],
    client: httpx.AsyncClient,
    authorization: str | None,
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = await post_protobuf(
        client, guarded, export_request(), content=one_event(), headers=headers
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert TOKEN not in response.text
    assert events == [] and guarded.accepted == 0 and guarded.refused == 1


async def test_every_path_and_method_wants_the_bearer_first(
    guarded: EventReceiver, client: httpx.AsyncClient
) -> None:
    assert (await client.get(guarded.endpoint + LOGS_PATH)).status_code == 401
    assert (await client.post(guarded.endpoint + "/elsewhere")).status_code == 401
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert (await client.get(guarded.endpoint + LOGS_PATH, headers=bearer)).status_code == 405


@pytest.mark.parametrize("scheme", ["Bearer", "bearer"])  # its name is case-insensitive
async def test_with_the_bearer_the_events_are_taken(
    guarded: EventReceiver, events: list[OwnershipEvent], client: httpx.AsyncClient, scheme: str
) -> None:
    assert guarded.endpoint.startswith("http://127.0.0.2:")
    headers = {"Authorization": f"{scheme} {TOKEN}"}
    response = await post_protobuf(
        client, guarded, export_request(), content=one_event(), headers=headers
    )
    assert response.status_code == 200
    assert [event.rollout_id for event in events] == ["r1"] and guarded.accepted == 1


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS"]
)
async def test_the_sdk_exporter_sends_the_bearer_from_the_standard_variables(
    guarded: EventReceiver,
    events: list[OwnershipEvent],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http._log_exporter")
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

    # As the README says to start a server: the header in the W3C form the variable takes.
    monkeypatch.setenv(variable, f"Authorization=Bearer%20{TOKEN}")
    provider = LoggerProvider()
    # Built as the servers build theirs: an endpoint and a timeout, no headers of its own.
    provider.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=guarded.endpoint + LOGS_PATH, timeout=3))
    )
    emit = provider.get_logger("osmosis.rollout.ownership").emit
    try:
        # The exporter sends with blocking I/O: from a thread, the receiver answers here.
        await asyncio.to_thread(
            emit,
            timestamp=time.time_ns(),
            body="Rollout ownership",
            attributes=ownership_attributes("sent-with-the-bearer"),
        )
    finally:
        await asyncio.to_thread(provider.shutdown)
    assert [event.rollout_id for event in events] == ["sent-with-the-bearer"]
    assert guarded.refused == 0
