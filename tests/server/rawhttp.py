"""A thin raw-HTTP driver for server tests: exactly what goes on the wire, nothing hidden."""

from __future__ import annotations

from typing import Any

import httpx

from core.types import POLLING_LEASE_HEADER


def rollout_body(rollout_id: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "rollout_id": rollout_id,
        "initial_messages": [{"role": "user", "content": "What is 6 * 7?"}],
        "chat_completions_url": "http://127.0.0.1:9/v1",
        "label": "42",
    }
    body.update(fields)
    return body


def raw_json(text: str) -> dict[str, Any]:
    """Keyword arguments of an httpx request whose body is `text` as is: JSON may spell a lone
    surrogate (`"\\udc80"`), which httpx's own encoder (to UTF-8) cannot send."""
    return {"content": text.encode("ascii"), "headers": {"content-type": "application/json"}}


class Wire:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.tokens: dict[str, str] = {}

    async def admit(self, rollout_id: str, **fields: Any) -> httpx.Response:
        response = await self.http.post("/rollout", json=rollout_body(rollout_id, **fields))
        if response.status_code == 202:
            self.tokens[rollout_id] = response.json()["polling_lease_token"]
        return response

    async def poll(self, rollout_id: str, token: str | None = None) -> httpx.Response:
        lease = token if token is not None else self.tokens[rollout_id]
        return await self.http.get(
            f"/rollout/{rollout_id}/result", headers={POLLING_LEASE_HEADER: lease}
        )

    async def until_terminal(self, rollout_id: str) -> tuple[list[str], dict[str, Any]]:
        """Poll like the official client (no sleep); return the statuses seen and the last body."""
        seen: list[str] = []
        while True:
            response = await self.poll(rollout_id)
            assert response.status_code == 200, response.text
            body = response.json()
            seen.append(body["status"])
            if body["status"] in ("success", "failure", "cancelled"):
                return seen, body

    async def cancel(self, **selector: Any) -> httpx.Response:
        return await self.http.post("/rollout/cancel", json=selector)
