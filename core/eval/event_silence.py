"""`EventSilence`: a `--server` run whose servers send it no ownership events (PROTOCOL.md
§8.1), what every front end says of it, and the settings that end it.

A server the user started has the run's event receiver only if it was started with its
endpoint; without its events the phases come from the polls and the model calls alone (an
official 0.3.8 server holds each poll until the next change, so no poll sees `running`; the
first model call proves it). The dashboard shows this on screen for as long as it holds, the
headless front end and logs.txt say it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from core.types import OTLP_ENDPOINT_ENV, PREVIEW_ROOT_ENV

#: How long after a server admitted the run's first rollout its events may take to come before
#: the run says they do not: a server reports `queued` at admission, and the official exporter
#: batches for about a second and gives an export up to 3 s (PROTOCOL.md §8.1).
EVENTS_GRACE_SEC = 5.0


@dataclass(frozen=True)
class EventSilence:
    """The servers of a `--server` run that sent no event, and where events would go."""

    servers: tuple[str, ...]
    #: The event receiver's base URL: `OSMOSIS_ROLLOUT_OTLP_ENDPOINT`'s value.
    endpoint: str
    #: The run's previews folder: `_OSMOSIS_ROLLOUT_PREVIEW_ROOT`'s value.
    preview_root: str
    #: `--events-port` was given: the endpoint is the same on every run that gives it.
    port_fixed: bool

    @property
    def headline(self) -> str:
        servers = ", ".join(url.removeprefix("http://") for url in self.servers)
        return f"no ownership events from {servers}: phases come from polls and model calls"

    @property
    def settings(self) -> str:
        """The exact settings to start the server with."""
        return (
            f"start it with {OTLP_ENDPOINT_ENV}={self.endpoint} "
            f"{PREVIEW_ROOT_ENV}={self.preview_root}"
        )

    @property
    def keeping(self) -> str:
        """How to keep the endpoint the same across runs."""
        port = urlsplit(self.endpoint).port
        if self.port_fixed:
            return f"--events-port {port} keeps this endpoint on every run"
        return f"its port is this run's: add --events-port {port} to keep it on every run"

    def lines(self) -> tuple[str, str, str]:
        return (self.headline, self.settings, self.keeping)

    def message(self) -> str:
        """All of it in one line (logs.txt, the headless notice)."""
        return "; ".join(self.lines())
