"""A scriptable OpenAI-compatible chat endpoint for the gateway tests.

`FakeUpstream().app` answers `POST .../chat/completions`. Each request is kept (`requests`:
body and headers); the answer comes from `respond`, which a test replaces, and defaults to a
completion saying "6" with usage 7/1/8. `hold` makes every request wait until it is set (or
the client leaves: `disconnects` counts those), so a test can look at a call in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass
class Answer:
    status: int = 200
    body: Any = None
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


def completion(
    content: str | None = "6",
    *,
    usage: dict[str, int] | None = None,
    message_extra: dict[str, Any] | None = None,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    """A chat.completion body as an OpenAI-compatible server sends it."""
    return {
        "id": "chatcmpl-fake-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **(message_extra or {})},
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage
        if usage is not None
        else {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
    }


def error(status: int, message: str, **headers: str) -> Answer:
    return Answer(
        status=status,
        body={"error": {"message": message, "type": "fake_error", "code": None}},
        headers=headers,
    )


def quoting_the_key(status: int) -> Callable[[Seen], Answer]:
    """A `respond` refusing every call with `status` and quoting back the key it was sent, as
    some providers do; it asks not to be retried, so that a test stays quick."""

    def respond(seen: Seen) -> Answer:
        given = seen.headers.get("authorization", "").removeprefix("Bearer ")
        return error(status, f"Incorrect API key provided: {given}", **{"x-should-retry": "false"})

    return respond


@dataclass
class Seen:
    body: dict[str, Any]
    headers: dict[str, str]


class FakeUpstream:
    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self.respond: Callable[[Seen], Answer] = lambda _seen: Answer(body=completion())
        self.hold: asyncio.Event | None = None
        self.arrived = asyncio.Event()
        self.disconnects = 0
        self.app = Starlette(
            routes=[Route("/{base:path}/chat/completions", self._endpoint, methods=["POST"])]
        )

    async def _endpoint(self, request: Request) -> Response:
        seen = Seen(body=await request.json(), headers=dict(request.headers))
        self.requests.append(seen)
        self.arrived.set()
        if self.hold is not None and not await self._held(request, self.hold):
            self.disconnects += 1
            return Response(status_code=499)
        answer = self.respond(seen)
        if answer.text is not None:
            return Response(answer.text, status_code=answer.status, headers=answer.headers)
        return JSONResponse(answer.body, status_code=answer.status, headers=answer.headers)

    @staticmethod
    async def _held(request: Request, hold: asyncio.Event) -> bool:
        """Wait for `hold`; False when the client went away first."""

        async def gone() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        released = asyncio.ensure_future(hold.wait())
        left = asyncio.ensure_future(gone())
        done, pending = await asyncio.wait({released, left}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        return released in done
