"""The stub model (`server_stub.llm`) answering a known set of questions otherwise: what makes
run A and run B of one workspace differ row by row, for the compare tests.

`python -m tests.compare.planned_model PORT PLAN` serves the stub on 127.0.0.1:PORT. PLAN is
a JSON file mapping a question (the last user message, as the dataset holds it) to the
directives of its successive requests, each one the stub's own `X-Stub-Behaviour` value (`ok`,
`wrong`, `error`, `slow:<s>`): the k-th request for that question gets the k-th directive, the
last one repeated; a question the plan does not name is answered as usual. With one rollout in
flight at a time both tools (ours and the official `osmosis eval run`) send a row's attempts
in attempt order, so the k-th directive is attempt k's answer.

An injected error is marked `x-should-retry: false` (which our gateway and the OpenAI SDK
under LiteLLM both honour), so an erring attempt is one request and not three.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import uvicorn

from server_stub.llm import create_chat_app
from server_stub.llm_answers import text_of
from server_stub.llm_behaviour import BEHAVIOUR_HEADER

Plan = Mapping[str, list[str]]
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]


def read_plan(path: Path) -> dict[str, list[str]]:
    plan: dict[str, list[str]] = json.loads(path.read_text(encoding="utf-8"))
    return plan


def last_user_text(body: bytes) -> str:
    """The last user message of a chat request body ("" when there is none)."""
    try:
        messages = json.loads(body).get("messages")
    except (ValueError, AttributeError):
        return ""
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") == "user":
            return text_of(message.get("content"))
    return ""


class PlannedAnswers:
    """ASGI middleware before the stub: it reads the request's question and sets the stub's
    behaviour header from the plan."""

    def __init__(self, app: Any, plan: Plan) -> None:
        self.app = app
        self.plan = plan
        self.asked: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        question = last_user_text(body)
        directives = self.plan.get(question)
        if directives:
            nth = self.asked[question]
            self.asked[question] += 1
            directive = directives[min(nth, len(directives) - 1)]
            header = (BEHAVIOUR_HEADER.lower().encode(), directive.encode())
            scope = {**scope, "headers": [*scope["headers"], header]}
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return dict(await receive())
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] >= 500:
                message = {**message, "headers": [*message["headers"], NO_RETRY]}
            await send(message)

        await self.app(scope, replay, marked)


NO_RETRY = (b"x-should-retry", b"false")


def main() -> None:
    port, plan = int(sys.argv[1]), read_plan(Path(sys.argv[2]))
    app = PlannedAnswers(create_chat_app(), plan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
