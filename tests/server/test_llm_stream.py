"""Streamed answers (`stream` true) of the stub chat endpoint over real loopback HTTP.

The event stream is read by hand (tests/server/chat.py) so its exact shape is checked; when the
venv has the `openai` SDK, a last test lets the real client parse it too.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from core.serving.loopback import serve_in_loop
from server_stub.llm import create_chat_app
from server_stub.llm_answers import FALLBACK_REPLY, STREAM_PIECES, count_tokens, stream_pieces
from server_stub.llm_behaviour import BEHAVIOUR_HEADER, StubChatSettings
from tests.server.chat import (
    AUTH,
    KEY,
    ask,
    chunks_of,
    hung_call_dropped,
    outcomes,
    stream_chat,
    streamed_text,
)

CONVERSATION: dict[str, Any] = {
    "model": "gpt-test",
    "messages": [
        {"role": "system", "content": "Reply with the number only."},
        {"role": "user", "content": [{"type": "text", "text": "What is 2.5 + 0.25?"}]},
    ],
}
# System: 6 words + "." ; user: What is 2 . 5 + 0 . 25 ? = 10; reply: 2 . 75 = 3.
CONVERSATION_USAGE = {"prompt_tokens": 16, "completion_tokens": 3, "total_tokens": 19}


def deltas(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [choice["delta"] for chunk in chunks for choice in chunk["choices"]]


# --- pure helpers -------------------------------------------------------------------------------


def test_stream_pieces_join_back_into_a_few_token_aligned_pieces() -> None:
    for text in ("391", "2.75", "-15", FALLBACK_REPLY, "  a b  c ", " ", ""):
        pieces = stream_pieces(text)
        assert "".join(pieces) == text, text
        assert 1 <= len(pieces) <= STREAM_PIECES, text
    assert stream_pieces("391") == ["391"]
    assert stream_pieces("2.75") == ["2", ".", "75"]
    assert len(stream_pieces(FALLBACK_REPLY)) == STREAM_PIECES


# --- the stream's shape and usage ---------------------------------------------------------------


async def test_a_stream_has_the_openai_chunk_shape(
    chat_app: Starlette, stub: tuple[str, httpx.AsyncClient]
) -> None:
    url, client = stub
    before = int(time.time())
    response, events = await stream_chat(client, url, CONVERSATION)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = chunks_of(events)
    assert len({chunk["id"] for chunk in chunks}) == 1
    assert chunks[0]["id"].startswith("chatcmpl-")
    for chunk in chunks:
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == "gpt-test"
        assert before <= chunk["created"] <= int(time.time())
        assert [choice["index"] for choice in chunk["choices"]] == [0]
        assert "usage" not in chunk  # not asked for
    # The role first, the reply a token or so at a time, then an empty delta that says "stop".
    assert deltas(chunks) == [
        {"role": "assistant", "content": "2"},
        {"content": "."},
        {"content": "75"},
        {},
    ]
    finish = [choice["finish_reason"] for chunk in chunks for choice in chunk["choices"]]
    assert finish == [None, None, None, "stop"]
    assert chat_app.state.stats.streamed == chat_app.state.stats.completions == 1


async def test_the_usage_chunk_comes_last_when_asked(stub: tuple[str, httpx.AsyncClient]) -> None:
    url, client = stub
    body = {**CONVERSATION, "stream_options": {"include_usage": True}}
    response, events = await stream_chat(client, url, body)
    assert response.status_code == 200
    *answer, last = chunks_of(events)
    assert last["choices"] == []
    assert last["usage"] == CONVERSATION_USAGE
    assert last["id"] == answer[0]["id"]
    assert all(chunk["usage"] is None for chunk in answer)
    assert streamed_text(answer) == "2.75"
    assert answer[-1]["choices"][0]["finish_reason"] == "stop"
    # The plain answer to the same request counts the same.
    plain = await client.post(f"{url}/v1/chat/completions", json=CONVERSATION, headers=AUTH)
    assert plain.json()["usage"] == CONVERSATION_USAGE
    # include_usage false: no usage chunk, as without stream_options.
    body = {**CONVERSATION, "stream_options": {"include_usage": False}}
    chunks = chunks_of((await stream_chat(client, url, body))[1])
    assert all("usage" not in chunk and chunk["choices"] for chunk in chunks)


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "6 * 7"}],
        [{"role": "user", "content": "Tell me a story about a dragon, please."}],
        [
            {"role": "system", "content": "You are a careful calculator."},
            {"role": "user", "content": "What is 1 + 1?"},
            {"role": "assistant", "content": "2"},
            {"role": "user", "content": [{"type": "text", "text": "And 123 * 456?"}]},
        ],
    ],
)
async def test_usage_is_counted_from_the_text_both_ways(
    stub: tuple[str, httpx.AsyncClient], messages: list[dict[str, Any]]
) -> None:
    url, client = stub
    body = {"model": "m", "messages": messages, "stream_options": {"include_usage": True}}
    plain = (await client.post(f"{url}/v1/chat/completions", json=body, headers=AUTH)).json()
    reply = plain["choices"][0]["message"]["content"]
    texts = [
        m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in messages
    ]
    prompt = sum(count_tokens(text) for text in texts)
    completion = count_tokens(reply)
    expected = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    assert plain["usage"] == expected
    chunks = chunks_of((await stream_chat(client, url, body))[1])
    assert streamed_text(chunks) == reply
    assert chunks[-1]["usage"] == expected


# --- knobs --------------------------------------------------------------------------------------


async def test_an_injected_error_is_a_500_before_any_stream(
    chat_app: Starlette, stub: tuple[str, httpx.AsyncClient]
) -> None:
    url, client = stub
    response, events = await stream_chat(
        client, url, ask("What is 17 * 23?"), headers={BEHAVIOUR_HEADER: "error"}
    )
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["type"] == "server_error"
    assert events == []
    stats = chat_app.state.stats
    assert (stats.errors, stats.completions, stats.streamed) == (1, 0, 0)


async def test_a_stream_needs_the_bearer_and_sane_stream_fields(
    chat_app: Starlette, stub: tuple[str, httpx.AsyncClient]
) -> None:
    url, client = stub
    unauthorized, _ = await stream_chat(client, url, ask("1+1"), headers={"Authorization": ""})
    assert unauthorized.status_code == 401
    bad_options, _ = await stream_chat(client, url, ask("1+1", stream_options="usage"))
    assert bad_options.status_code == 400
    assert "stream_options" in bad_options.json()["error"]["message"]
    assert chat_app.state.stats.rejected == 2


async def test_wrong_streams_an_answer_off_by_a_little(
    chat_app: Starlette, stub: tuple[str, httpx.AsyncClient]
) -> None:
    url, client = stub
    answers = []
    for _ in range(8):
        response, events = await stream_chat(
            client, url, ask("What is 17 * 23?"), headers={BEHAVIOUR_HEADER: "wrong"}
        )
        assert response.status_code == 200
        answers.append(int(streamed_text(chunks_of(events))))
    assert all(1 <= abs(answer - 391) <= 2 for answer in answers)
    assert chat_app.state.stats.wrong_answers == chat_app.state.stats.streamed == 8


async def test_slow_delays_the_stream(stub: tuple[str, httpx.AsyncClient]) -> None:
    url, client = stub
    started = time.monotonic()
    response, events = await stream_chat(
        client, url, ask("What is 17 * 23?"), headers={BEHAVIOUR_HEADER: "slow:0.3"}
    )
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert streamed_text(chunks_of(events)) == "391"
    assert 0.3 <= elapsed < 2.0


async def test_a_hung_stream_lasts_until_the_client_gives_up(chat_app: Starlette) -> None:
    started = time.monotonic()
    async with serve_in_loop(chat_app) as url:
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.ReadTimeout):
                await stream_chat(
                    client, url, ask("1+1"), headers={BEHAVIOUR_HEADER: "hang"}, timeout=0.3
                )
        # The server notices the disconnect, so shutting down does not wait for the hang.
        await hung_call_dropped(chat_app)
    assert time.monotonic() - started < 3.0


async def test_ok_beats_the_fault_rates_in_a_stream() -> None:
    app = create_chat_app(StubChatSettings(error_rate=1.0, wrong_answer_rate=1.0))
    async with serve_in_loop(app) as url, httpx.AsyncClient() as client:
        forced, events = await stream_chat(
            client, url, ask("3*3"), headers={BEHAVIOUR_HEADER: "ok"}
        )
        default, _ = await stream_chat(client, url, ask("3*3"))
    assert forced.status_code == 200
    assert streamed_text(chunks_of(events)) == "9"
    assert default.status_code == 500


async def test_streamed_and_plain_requests_replay_the_same_seeded_sequence() -> None:
    # Four draws per request whatever the outcome or the shape of the answer.
    settings = StubChatSettings(error_rate=0.3, wrong_answer_rate=0.3, seed=123)
    plain = await outcomes(settings, 12)
    streamed = await outcomes(settings, 12, stream=True)
    assert streamed == plain
    assert streamed == await outcomes(settings, 12, stream=True)
    errors = sum(status == 500 for status, _ in streamed)
    wrong = sum(status == 200 and answer != "391" for status, answer in streamed)
    right = sum(answer == "391" for _, answer in streamed)
    assert min(errors, wrong, right) > 0


# --- a real OpenAI client -----------------------------------------------------------------------


async def test_the_openai_sdk_reads_streamed_and_plain_answers(
    stub: tuple[str, httpx.AsyncClient],
) -> None:
    openai = pytest.importorskip("openai")
    url, _ = stub
    question = [{"role": "user", "content": "What is 17 * 23?"}]
    usage = (6, 1, 7)  # What is 17 * 23 ? / 391

    def counts(u: Any) -> tuple[int, int, int]:
        return (u.prompt_tokens, u.completion_tokens, u.total_tokens)

    sdk = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    try:
        stream = await sdk.chat.completions.create(
            model="osmosis-rollout",
            messages=question,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "391"
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].choices == []
        assert counts(chunks[-1].usage) == usage
        plain = await sdk.chat.completions.create(model="osmosis-rollout", messages=question)
        assert plain.choices[0].message.content == "391"
        assert counts(plain.usage) == usage
        with pytest.raises(openai.InternalServerError):
            await sdk.chat.completions.create(
                model="osmosis-rollout",
                messages=question,
                stream=True,
                extra_headers={BEHAVIOUR_HEADER: "error"},
            )
    finally:
        await sdk.close()
