"""A tiny OTLP/HTTP logs receiver for the tests: collects what a rollout server exports to
`<base>/v1/logs` (protobuf), decoded into plain records."""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

Scalar = str | int | float | bool


@dataclass(frozen=True)
class LogRecord:
    """One exported log record, with the resource and scope it came under."""

    time_unix_nano: int
    severity_text: str
    body: Scalar | None
    attributes: dict[str, Scalar | None]
    resource: dict[str, Scalar | None]
    scope: str

    @property
    def status(self) -> object:
        return self.attributes.get("status")

    @property
    def rollout_id(self) -> object:
        return self.attributes.get("rollout_id")


def _value(value: AnyValue) -> Scalar | None:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    return None


@dataclass
class OtlpReceiver:
    """`app` accepts `POST /v1/logs`; `records` holds everything received, in arrival order.

    `answer_status` other than 200 makes it refuse every export (after recording nothing).
    """

    answer_status: int = 200
    records: list[LogRecord] = field(default_factory=list)
    #: The raw request bodies, decompressed, to search for what must never be exported.
    bodies: list[bytes] = field(default_factory=list)
    app: Starlette = field(init=False)

    def __post_init__(self) -> None:
        self.app = Starlette(routes=[Route("/v1/logs", self._logs, methods=["POST"])])

    async def _logs(self, request: Request) -> Response:
        if self.answer_status != 200:
            return Response(b"", status_code=self.answer_status)
        body = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        self.bodies.append(body)
        export = ExportLogsServiceRequest.FromString(body)
        for resource_logs in export.resource_logs:
            resource = {a.key: _value(a.value) for a in resource_logs.resource.attributes}
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    self.records.append(
                        LogRecord(
                            time_unix_nano=record.time_unix_nano,
                            severity_text=record.severity_text,
                            body=_value(record.body),
                            attributes={a.key: _value(a.value) for a in record.attributes},
                            resource=resource,
                            scope=scope_logs.scope.name,
                        )
                    )
        return Response(
            ExportLogsServiceResponse().SerializeToString(),
            media_type="application/x-protobuf",
        )

    def of(self, rollout_id: str) -> list[LogRecord]:
        """The records of one rollout, in arrival order."""
        return [r for r in self.records if r.rollout_id == rollout_id]

    def statuses(self, rollout_id: str) -> list[object]:
        return [r.status for r in self.of(rollout_id)]

    def sequences(self) -> list[object]:
        """Every record's `event_sequence`, in arrival order."""
        return [r.attributes.get("event_sequence") for r in self.records]
