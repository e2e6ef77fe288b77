"""What becomes an ownership event, and with which fields (PROTOCOL.md §8.1): real HTTP to a
receiver on a loopback port, in both OTLP encodings."""

from __future__ import annotations

import gzip
import logging
import time
import zlib
from typing import Any

import httpx
import pytest

from core.eval.events.ownership import CLOCK_SLACK_SEC, OwnershipEvent
from core.eval.events.receiver import PROTOBUF, EventReceiver, EventReceiverError
from core.serving.loopback import LoopbackServer, listener_options
from core.types import RolloutStatus
from tests.eval.events.otlp import (
    answer,
    export_request,
    ownership_attributes,
    port_of,
    post_json,
    post_protobuf,
    record,
)


async def test_a_protobuf_ownership_record_becomes_an_event(
    receiver: EventReceiver, client: httpx.AsyncClient, events: list[OwnershipEvent]
) -> None:
    before = time.monotonic()
    attributes = ownership_attributes(
        "rollout-7",
        "grading",
        42,
        server_name="demo",
        namespace="team-a",
        run_id="run-1",
        run_name="nightly",
    )
    server_time_ns = time.time_ns()
    response = await post_protobuf(
        client, receiver, export_request(record(attributes, time_ns=server_time_ns))
    )
    assert response.headers["content-type"] == PROTOBUF
    assert not answer(response).HasField("partial_success")
    [event] = events
    assert event == OwnershipEvent(
        rollout_id="rollout-7",
        server_id="srv-a",
        status=RolloutStatus.GRADING,
        event_sequence=42,
        server_time=server_time_ns / 1e9,
        received_at=event.received_at,
        server_name="demo",
        namespace="team-a",
        run_id="run-1",
        run_name="nightly",
    )
    assert before <= event.received_at <= time.monotonic()
    assert (receiver.accepted, receiver.dropped, receiver.refused) == (1, 0, 0)


async def test_otlp_json_is_read_and_answered_as_json(
    receiver: EventReceiver, client: httpx.AsyncClient, events: list[OwnershipEvent]
) -> None:
    records = [record(ownership_attributes("r1", status)) for status in ("queued", "success")]
    response = await post_json(client, receiver, export_request(*records))
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {}
    assert [(e.rollout_id, e.status) for e in events] == [
        ("r1", RolloutStatus.QUEUED),
        ("r1", RolloutStatus.SUCCESS),
    ]
    assert events[0].server_name is None


async def test_hand_written_otlp_json_with_string_int64s_and_unknown_fields(
    receiver: EventReceiver, client: httpx.AsyncClient, events: list[OwnershipEvent]
) -> None:
    # What another language's exporter writes: int64 values as strings, hex ids, a field
    # this protocol version does not know.
    def attr(key: str, value: dict[str, Any]) -> dict[str, Any]:
        return {"key": key, "value": value}

    server_time_ns = time.time_ns()
    body = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": str(server_time_ns),
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "someFutureField": {"x": 1},
                                "attributes": [
                                    attr("event", {"stringValue": "rollout.ownership"}),
                                    attr("rollout_id", {"stringValue": "r9"}),
                                    attr("server_id", {"stringValue": "srv-b"}),
                                    attr("status", {"stringValue": "cancelled"}),
                                    attr("event_sequence", {"intValue": "12"}),
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    response = await client.post(receiver.endpoint + "/v1/logs", json=body)
    assert response.status_code == 200, response.text
    [event] = events
    assert (event.rollout_id, event.server_id, event.status) == (
        "r9",
        "srv-b",
        RolloutStatus.CANCELLED,
    )
    assert event.event_sequence == 12
    assert event.server_time == server_time_ns / 1e9


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_compressed_bodies_are_read(
    receiver: EventReceiver,
    client: httpx.AsyncClient,
    events: list[OwnershipEvent],
    encoding: str,
) -> None:
    raw = export_request(record(ownership_attributes())).SerializeToString()
    compressed = gzip.compress(raw) if encoding == "gzip" else zlib.compress(raw)
    response = await post_protobuf(
        client,
        receiver,
        export_request(),
        content=compressed,
        headers={"Content-Encoding": encoding},
    )
    answer(response)
    assert [event.rollout_id for event in events] == ["r1"]


UNUSABLE = [
    pytest.param({"event": None}, id="no-event-attribute"),
    pytest.param({"event": "rollout.other"}, id="another-event"),
    pytest.param({"rollout_id": None}, id="no-rollout-id"),
    pytest.param({"rollout_id": "   "}, id="blank-rollout-id"),
    pytest.param({"rollout_id": "r\x1b[31m"}, id="unprintable-rollout-id"),
    pytest.param({"rollout_id": "r" * 513}, id="long-rollout-id"),
    pytest.param({"rollout_id": 5}, id="int-rollout-id"),
    pytest.param({"server_id": None}, id="no-server-id"),
    pytest.param({"server_id": "a\nb"}, id="multi-line-server-id"),
    pytest.param({"status": "exploded"}, id="unknown-status"),
    pytest.param({"status": "RUNNING"}, id="status-in-capitals"),
    pytest.param({"status": None}, id="no-status"),
    pytest.param({"event_sequence": None}, id="no-sequence"),
    pytest.param({"event_sequence": "3"}, id="text-sequence"),
    pytest.param({"event_sequence": 3.0}, id="float-sequence"),
    pytest.param({"event_sequence": True}, id="bool-sequence"),
    pytest.param({"event_sequence": -1}, id="negative-sequence"),
]


@pytest.mark.parametrize("change", UNUSABLE)
async def test_unusable_records_are_dropped_and_reported_as_rejected(
    receiver: EventReceiver,
    client: httpx.AsyncClient,
    events: list[OwnershipEvent],
    change: dict[str, Any],
) -> None:
    good = record(ownership_attributes("good"))
    bad = record(ownership_attributes(**{"rollout_id": "bad", **change}))
    response = await post_protobuf(client, receiver, export_request(bad, good))
    partial = answer(response).partial_success
    assert partial.rejected_log_records == 1
    assert "rollout.ownership" in partial.error_message
    assert [event.rollout_id for event in events] == ["good"]
    assert (receiver.accepted, receiver.dropped, receiver.refused) == (1, 1, 0)


async def test_rejections_are_reported_in_json_too(
    receiver: EventReceiver, client: httpx.AsyncClient
) -> None:
    bad = record(ownership_attributes(status="exploded"))
    response = await post_json(client, receiver, export_request(bad, bad))
    assert response.json()["partialSuccess"]["rejectedLogRecords"] == "2"


async def test_every_protocol_status_is_accepted(
    receiver: EventReceiver, client: httpx.AsyncClient, events: list[OwnershipEvent]
) -> None:
    records = [
        record(ownership_attributes(status=status.value, sequence=n))
        for n, status in enumerate(RolloutStatus)
    ]
    await post_protobuf(client, receiver, export_request(*records))
    assert [event.status for event in events] == list(RolloutStatus)
    assert [event.event_sequence for event in events] == list(range(len(RolloutStatus)))


async def test_unusable_optional_texts_are_left_out_not_the_event(
    receiver: EventReceiver, client: httpx.AsyncClient, events: list[OwnershipEvent]
) -> None:
    attributes = ownership_attributes(
        server_name="\x07bell", namespace="", run_id=7, run_name="n" * 512
    )
    await post_protobuf(client, receiver, export_request(record(attributes)))
    [event] = events
    assert (event.server_name, event.namespace, event.run_id) == (None, None, None)
    assert event.run_name == "n" * 512


async def test_server_time_falls_back_to_the_observed_time_then_none(
    receiver: EventReceiver, client: httpx.AsyncClient, events: list[OwnershipEvent]
) -> None:
    observed = record(ownership_attributes("observed"), time_ns=0)
    observed_ns = observed.observed_time_unix_nano = time.time_ns()
    untimed = record(ownership_attributes("untimed"), time_ns=0)
    await post_protobuf(client, receiver, export_request(observed, untimed))
    assert [(e.rollout_id, e.server_time) for e in events] == [
        ("observed", observed_ns / 1e9),
        ("untimed", None),
    ]


async def test_records_spread_over_resources_and_scopes_all_arrive(
    receiver: EventReceiver, client: httpx.AsyncClient, events: list[OwnershipEvent]
) -> None:
    request = export_request(record(ownership_attributes("a")))
    other = request.resource_logs.add()
    other.scope_logs.add().log_records.append(record(ownership_attributes("b")))
    other.scope_logs.add().log_records.append(record(ownership_attributes("c")))
    await post_protobuf(client, receiver, request)
    assert [event.rollout_id for event in events] == ["a", "b", "c"]


async def test_an_empty_request_is_a_success(
    receiver: EventReceiver, client: httpx.AsyncClient
) -> None:
    response = await post_protobuf(client, receiver, export_request(), content=b"")
    assert not answer(response).HasField("partial_success")
    assert (receiver.accepted, receiver.dropped, receiver.refused) == (0, 0, 0)


async def test_a_failing_hook_is_logged_once_per_request_and_counted_as_dropped(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def hook(event: OwnershipEvent) -> None:
        seen.append(event.rollout_id)
        if event.rollout_id != "fine":
            raise RuntimeError("board bug")

    records = [record(ownership_attributes(rid)) for rid in ("x", "fine", "y")]
    with caplog.at_level(logging.ERROR, logger="core.eval.events.receiver"):
        async with EventReceiver(hook) as receiver:
            response = await post_protobuf(client, receiver, export_request(*records))
    assert answer(response).partial_success.rejected_log_records == 2
    assert seen == ["x", "fine", "y"]
    assert (receiver.accepted, receiver.dropped) == (1, 2)
    assert [r.message for r in caplog.records] == ["the ownership event hook failed"]


async def test_without_a_hook_events_are_only_counted(client: httpx.AsyncClient) -> None:
    async with EventReceiver() as receiver:
        answer(
            await post_protobuf(client, receiver, export_request(record(ownership_attributes())))
        )
        assert receiver.accepted == 1


async def test_endpoint_fixed_port_and_a_busy_port() -> None:
    taken = LoopbackServer(_empty_app, **listener_options())
    await taken.start()
    port = int(str(taken.base_url).rsplit(":", 1)[1])
    try:
        with pytest.raises(EventReceiverError, match=f"127.0.0.1:{port}"):
            await EventReceiver(port=port).start()
        await taken.stop()
        receiver = EventReceiver(port=port)
        async with receiver:
            assert receiver.endpoint == f"http://127.0.0.1:{port}"
            assert port_of(receiver) == port
        with pytest.raises(EventReceiverError, match="not running"):
            _ = receiver.endpoint
    finally:
        await taken.stop()


async def _empty_app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("never called")


async def test_records_dated_far_from_the_receivers_clock_are_dropped(
    receiver: EventReceiver, client: httpx.AsyncClient, events: list[OwnershipEvent]
) -> None:
    """Issue 30 §13: a success dated 1970 (with sequence 2**63-1) and a running dated 2200,
    posted by any local process, are no events: dropped, reported as rejected; one dated
    within the slack of now is taken."""
    now_ns = time.time_ns()
    slack_ns = int(CLOCK_SLACK_SEC * 1e9)
    forged = [
        record(ownership_attributes("r1", "success", 2**63 - 1), time_ns=1),
        record(ownership_attributes("r1", "running", 2), time_ns=7_258_118_400 * 10**9),
        record(ownership_attributes("r1", "queued", 3), time_ns=now_ns - 2 * slack_ns),
    ]
    near = record(ownership_attributes("r1", "queued", 1), time_ns=now_ns - slack_ns // 2)
    response = await post_protobuf(client, receiver, export_request(*forged, near))
    assert answer(response).partial_success.rejected_log_records == 3
    assert [(e.status, e.event_sequence) for e in events] == [(RolloutStatus.QUEUED, 1)]
    assert (receiver.accepted, receiver.dropped) == (1, 3)
