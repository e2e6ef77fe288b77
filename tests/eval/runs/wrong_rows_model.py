"""A stub model that answers a known set of rows wrong: server_stub's chat endpoint, told per
request (its `X-Stub-Behaviour` header) to answer `wrong` when the question is one of them.
Two runs of the same rows against two such models differ on exactly the rows that differ
between their sets: what a comparison with a baseline is tested on."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.serving.loopback import serve_in_loop
from server_stub.llm import create_chat_app
from server_stub.llm_behaviour import BEHAVIOUR_HEADER
from tests.eval.runs.servers import threaded_server


def wrong_on(questions: set[str], app: ASGIApp) -> ASGIApp:
    """`app`, with every chat request whose messages hold one of `questions` asked to be
    answered wrong."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        text = json.dumps(json.loads(body or b"{}").get("messages", []))
        headers = list(scope["headers"])
        if any(question in text for question in questions):
            headers.append((BEHAVIOUR_HEADER.lower().encode(), b"wrong"))
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app({**scope, "headers": headers}, replay, send)

    return asgi


@contextlib.contextmanager
def wrong_rows_model(*questions: str) -> Iterator[str]:
    """The model on a loopback port for the block, answering `questions` (text of the user
    prompts, e.g. "7 * 8") wrong and every other one right; yields its `--chat-url`."""
    app = wrong_on(set(questions), create_chat_app())
    with threaded_server(lambda: serve_in_loop(app)) as url:
        yield url
