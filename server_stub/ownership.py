"""Ownership events: one OTLP log record per status the server gives a rollout (PROTOCOL.md §8.1).

A watcher (the eval) learns from them which server holds which rollout and when each phase
began by the server's own clock, without polling for it. The feed is on when an OTLP/HTTP base
URL is configured at server start; OpenTelemetry is imported only then, so a server without the
feed never loads it. Everything here is best effort: a failed export is logged by the SDK and
never reaches admission, leases or results.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from core.types import OTLP_ENDPOINT_ENV, RolloutStatus
from server_stub.log_safety import server_logger

if TYPE_CHECKING:
    from opentelemetry._logs import Logger
    from opentelemetry.sdk._logs import LoggerProvider

logger = server_logger(__name__)

SERVER_ID_ENV = "OSMOSIS_ROLLOUT_SERVER_ID"
INSTANCE_ID_ENV = "_OSMOSIS_ROLLOUT_INSTANCE_ID"
SERVER_NAME_ENV = "_OSMOSIS_ROLLOUT_NAME"
NAMESPACE_ENV = "OSMOSIS_ROLLOUT_NAMESPACE"
#: The request metadata key whose `run_id` and `run_name` the events carry.
OBSERVABILITY_METADATA_KEY = "osmosis_observability"

SERVICE_NAME = "osmosis-rollout-server"
EVENT_NAME = "rollout.ownership"
BODY = "Rollout ownership"
MAX_TEXT_CHARS = 512

# The SDK's batching, as the official server configures it.
SCHEDULE_DELAY_MS = 1000
MAX_EXPORT_BATCH = 128
MAX_QUEUE = 1024
EXPORT_TIMEOUT_MS = 3000
HTTP_TIMEOUT_SEC = 2.0
FLUSH_TIMEOUT_MS = 3000

# One sequence per process, shared by every server in it, so that a watcher can order the
# events of one server_id even when two in-process servers report under the same host name.
_sequence = itertools.count(1)

OwnershipTags = Mapping[str, str]


def owner_text(value: object) -> str | None:
    """`value` when it may travel in an event: printable, not blank, at most 512 characters."""
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > MAX_TEXT_CHARS
        or not value.isprintable()
    ):
        return None
    return value


def logs_url(base: str) -> str | None:
    """`<base>/v1/logs`, or None when `base` is not an http(s) URL with a host."""
    base = base.strip().rstrip("/")
    try:
        parts = urlsplit(base)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return f"{base}/v1/logs"


def server_identity() -> dict[str, str]:
    """`server_id` (always, unless unusable), `server_name` and `namespace` (when set)."""
    identity = {
        "server_id": os.environ.get(SERVER_ID_ENV)
        or os.environ.get(INSTANCE_ID_ENV)
        or socket.gethostname(),
        "server_name": os.environ.get(SERVER_NAME_ENV, ""),
        "namespace": os.environ.get(NAMESPACE_ENV, ""),
    }
    return {key: value for key, value in identity.items() if owner_text(value) is not None}


class OwnershipFeed:
    """The server's OTLP log exporter; `start()` at server start, `close()` at shutdown.

    `endpoint` is the OTLP/HTTP base URL; None reads `OSMOSIS_ROLLOUT_OTLP_ENDPOINT` at start,
    and an empty string keeps the feed off whatever the environment says.
    """

    def __init__(self, endpoint: str | None = None) -> None:
        self._endpoint = endpoint
        self._provider: LoggerProvider | None = None
        self._log: Logger | None = None
        self._identity: dict[str, str] = {}

    @property
    def on(self) -> bool:
        return self._log is not None

    def start(self) -> None:
        configured = self._endpoint
        if configured is None:
            configured = os.environ.get(OTLP_ENDPOINT_ENV, "")
        if not configured.strip():
            return
        url = logs_url(configured)
        if url is None:
            logger.warning("ownership events are off: the OTLP endpoint is not an http(s) URL")
            return
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
            from opentelemetry.sdk.resources import Resource
        except ImportError as exc:
            logger.warning("ownership events are off: OpenTelemetry is not installed (%s)", exc)
            return
        self._identity = server_identity()
        # A provider of our own: an application's global logger provider is left alone.
        provider = LoggerProvider(resource=Resource({"service.name": SERVICE_NAME}))
        provider.add_log_record_processor(
            BatchLogRecordProcessor(
                OTLPLogExporter(endpoint=url, timeout=HTTP_TIMEOUT_SEC),
                schedule_delay_millis=SCHEDULE_DELAY_MS,
                max_export_batch_size=MAX_EXPORT_BATCH,
                export_timeout_millis=EXPORT_TIMEOUT_MS,
                max_queue_size=MAX_QUEUE,
            )
        )
        self._provider = provider
        self._log = provider.get_logger(__name__)

    def tags(self, rollout_id: str, metadata: Mapping[str, object] | None) -> OwnershipTags | None:
        """What every event of this rollout carries; None when it must not be published.

        An unusable rollout_id or server_id cannot be shortened or left out: events of unrelated
        rollouts or servers would then share one key on the watcher's side.
        """
        if not self.on or owner_text(rollout_id) is None or "server_id" not in self._identity:
            return None
        tags = {"event": EVENT_NAME, "rollout_id": rollout_id, **self._identity}
        given = (metadata or {}).get(OBSERVABILITY_METADATA_KEY)
        if isinstance(given, Mapping):
            for key in ("run_id", "run_name"):
                value = owner_text(given.get(key))
                if value is not None:
                    tags[key] = value
        return tags

    def record(self, tags: OwnershipTags, status: RolloutStatus) -> None:
        """Queue one event for export (the SDK's batch thread sends it)."""
        log = self._log
        if log is None:
            return
        try:
            log.emit(
                timestamp=time.time_ns(),
                severity_text="INFO",
                body=BODY,
                attributes={**tags, "status": status.value, "event_sequence": next(_sequence)},
            )
        except Exception:
            logger.warning("could not record a rollout ownership event", exc_info=False)

    def close(self) -> None:
        """Flush what is queued and stop the exporter (blocks up to a few seconds)."""
        provider, self._provider, self._log = self._provider, None, None
        if provider is None:
            return
        try:
            provider.force_flush(timeout_millis=FLUSH_TIMEOUT_MS)
            provider.shutdown()
        except Exception:
            logger.warning("could not flush the rollout ownership events", exc_info=False)
