"""Calling the stub chat endpoint in tests: request bodies, plain and streamed calls, and a
hand-written server-sent-events reader, so the stream is checked byte by byte as it arrives."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette

from core.serving.loopback import serve_in_loop
from server_stub.llm import create_chat_app
from server_stub.llm_behaviour import StubChatSettings
from tests.polling import eventually

KEY = "sk-test-not-a-real-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
DONE = "[DONE]"


def ask(question: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "osmosis-rollout",
        "messages": [{"role": "user", "content": question}],
        **extra,
    }


async def chat(
    client: httpx.AsyncClient,
    url: str,
    question: str = "What is 17 * 23?",
    *,
    path: str = "/v1",
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    return await client.post(
        f"{url}{path}/chat/completions",
        json=ask(question),
        headers={**AUTH, **(headers or {})},
        **kwargs,
    )


async def sse_data(lines: AsyncIterator[str]) -> list[str]:
    """The `data` of each event in an SSE body, in order (comments and other fields skipped)."""
    events: list[str] = []
    data: list[str] = []
    async for line in lines:
        if not line:  # a blank line ends an event
            if data:
                events.append("\n".join(data))
            data = []
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").removeprefix(" "))
    if data:
        events.append("\n".join(data))
    return events


async def stream_chat(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> tuple[httpx.Response, list[str]]:
    """POST `body` with `stream` true; the response and its events' data (none unless 200)."""
    request_headers = {**AUTH, **(headers or {})}
    json_body = {**body, "stream": True}
    async with client.stream(
        "POST", f"{url}/v1/chat/completions", json=json_body, headers=request_headers, **kwargs
    ) as response:
        if response.status_code != 200:
            await response.aread()
            return response, []
        return response, await sse_data(response.aiter_lines())


def chunks_of(events: list[str]) -> list[dict[str, Any]]:
    """The JSON chunks of a complete stream, checking that it ends with `[DONE]` only once."""
    assert events[-1] == DONE, events[-1:]
    assert DONE not in events[:-1]
    return [json.loads(event) for event in events[:-1]]


def streamed_text(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"]
    )


async def outcomes(
    settings: StubChatSettings, requests: int, *, stream: bool = False
) -> list[tuple[int, str | None]]:
    """Outcome of `requests` sequential calls to a fresh app: status and answer."""
    seen: list[tuple[int, str | None]] = []
    async with serve_in_loop(create_chat_app(settings)) as url, httpx.AsyncClient() as client:
        for _ in range(requests):
            body = ask("What is 17 * 23?")
            content = None
            if stream:
                response, events = await stream_chat(client, url, body)
                if response.status_code == 200:
                    content = streamed_text(chunks_of(events))
            else:
                response = await client.post(f"{url}/chat/completions", json=body)
                if response.status_code == 200:
                    content = response.json()["choices"][0]["message"]["content"]
            seen.append((response.status_code, content))
    return seen


async def hung_call_dropped(chat_app: Starlette) -> None:
    """Check that the stub noticed a client give up on a hung call: nothing left in flight,
    one disconnect, nothing answered."""
    await eventually(
        lambda: chat_app.state.stats.in_flight == 0,
        "the stub to drop the hung call",
        timeout=1.0,
        interval=0.01,
    )
    assert chat_app.state.stats.disconnects == 1
    assert chat_app.state.stats.completions == 0
