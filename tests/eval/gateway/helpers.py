"""Plain helpers for the gateway tests."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

import httpx

from core.eval.gateway.model_gateway import ModelGateway


@dataclass(frozen=True)
class Event:
    """One SSE block: a comment (`: ping`), or an event name and its data."""

    comment: str | None = None
    event: str | None = None
    data: str | None = None

    def json(self) -> Any:
        assert self.data is not None
        return json.loads(self.data)


def parse_sse(text: str) -> list[Event]:
    """The blocks of an SSE body, parsed by hand (every block ends with a blank line)."""
    assert text.endswith("\n\n"), text
    events: list[Event] = []
    for block in text[:-2].split("\n\n"):
        fields: dict[str, str] = {}
        comment: str | None = None
        for line in block.split("\n"):
            if line.startswith(":"):
                comment = line[1:].strip()
            else:
                name, _, value = line.partition(": ")
                fields[name] = value
        events.append(Event(comment=comment, event=fields.get("event"), data=fields.get("data")))
    return events


def chat_body(text: str = "What is 2 * 3?", **extra: Any) -> dict[str, Any]:
    return {"model": "osmosis-rollout", "messages": [{"role": "user", "content": text}], **extra}


async def post_chat(
    client: httpx.AsyncClient,
    gateway: ModelGateway,
    body: Any,
    *,
    rollout_id: str = "r1",
    bearer: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """A rollout's call: `POST <chat_completions_url>/chat/completions` with the run's bearer."""
    sent = {"Authorization": f"Bearer {gateway.api_key if bearer is None else bearer}"}
    sent.update(headers or {})
    url = gateway.chat_completions_url(rollout_id) + "/chat/completions"
    if isinstance(body, (dict, list)):
        return await client.post(url, json=body, headers=sent)
    return await client.post(url, content=body, headers=sent)


def closed_port() -> int:
    """A loopback port that nothing listens on (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
