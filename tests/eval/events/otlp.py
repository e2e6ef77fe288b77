"""Plain helpers for the event receiver tests: ownership records as a server publishes them
(PROTOCOL.md §8.1), built with the OpenTelemetry protocol package, and raw HTTP for the
requests no well-behaved client would send."""

from __future__ import annotations

import asyncio
import time
from contextlib import suppress
from typing import Any

import httpx
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from core.eval.events.receiver import JSON, LOGS_PATH, PROTOBUF, EventReceiver


def ownership_attributes(
    rollout_id: str = "r1", status: str = "running", sequence: int = 1, **extra: Any
) -> dict[str, Any]:
    """The attributes of one ownership record; `extra` adds or replaces (None removes)."""
    attributes: dict[str, Any] = {
        "event": "rollout.ownership",
        "rollout_id": rollout_id,
        "server_id": "srv-a",
        "status": status,
        "event_sequence": sequence,
    }
    attributes.update(extra)
    return {key: value for key, value in attributes.items() if value is not None}


def _any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    return AnyValue(string_value=value)


def record(attributes: dict[str, Any], *, time_ns: int | None = None) -> LogRecord:
    """A record dated `time_ns`, by default now (the receiver takes only events dated near
    its own clock)."""
    return LogRecord(
        time_unix_nano=time.time_ns() if time_ns is None else time_ns,
        body=AnyValue(string_value="Rollout ownership"),
        attributes=[
            KeyValue(key=key, value=_any_value(value)) for key, value in attributes.items()
        ],
    )


def export_request(*records: LogRecord) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    resource_logs.resource.attributes.append(
        KeyValue(key="service.name", value=AnyValue(string_value="osmosis-rollout-server"))
    )
    resource_logs.scope_logs.add().log_records.extend(records)
    return request


def as_json(request: ExportLogsServiceRequest) -> str:
    return json_format.MessageToJson(request)


async def post_protobuf(
    client: httpx.AsyncClient,
    receiver: EventReceiver,
    request: ExportLogsServiceRequest,
    **kwargs: Any,
) -> httpx.Response:
    headers = {"Content-Type": PROTOBUF, **kwargs.pop("headers", {})}
    content = kwargs.pop("content", request.SerializeToString())
    return await client.post(
        receiver.endpoint + LOGS_PATH, content=content, headers=headers, **kwargs
    )


async def post_json(
    client: httpx.AsyncClient, receiver: EventReceiver, request: ExportLogsServiceRequest
) -> httpx.Response:
    return await client.post(
        receiver.endpoint + LOGS_PATH, content=as_json(request), headers={"Content-Type": JSON}
    )


def answer(response: httpx.Response) -> ExportLogsServiceResponse:
    """The OTLP answer, decoded in the encoding it says it has."""
    assert response.status_code == 200, response.text
    if response.headers["content-type"] == PROTOBUF:
        return ExportLogsServiceResponse.FromString(response.content)
    assert response.headers["content-type"].startswith(JSON)
    return json_format.Parse(response.text, ExportLogsServiceResponse())


def port_of(receiver: EventReceiver) -> int:
    return int(receiver.endpoint.rsplit(":", 1)[1])


async def raw_exchange(receiver: EventReceiver, head: bytes, body: bytes = b"") -> bytes:
    """Send bytes as they are, for requests httpx would never send, and return what came back
    before the server closed. A server that closes with part of the body unread resets the
    connection, and the reset may destroy its answer: then less (or nothing) comes back."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(receiver))
    received = bytearray()
    try:
        writer.write(head + body)
        with suppress(ConnectionError):
            await writer.drain()
            while chunk := await asyncio.wait_for(reader.read(65536), 30):
                received += chunk
    finally:
        writer.close()
        with suppress(ConnectionError):
            await writer.wait_closed()
    return bytes(received)


def status_of(raw: bytes) -> int:
    """The status code of the first response in `raw`."""
    assert raw.startswith(b"HTTP/1.1 "), raw[:200]
    return int(raw[9:12])


def post_head(content_type: str = PROTOBUF, *, length: int | None = None, extra: str = "") -> bytes:
    """A request head for `POST /v1/logs`; `length` None sends no Content-Length."""
    lines = [f"POST {LOGS_PATH} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {content_type}"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if extra:
        lines.append(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()
