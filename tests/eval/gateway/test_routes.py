"""The gateway's route over real loopback HTTP: answers, streams, refusals (PROTOCOL.md §9)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from core.eval.gateway.errors import GatewayError
from core.eval.gateway.model_gateway import ModelGateway
from core.eval.gateway.upstreams import OpenAICompatibleUpstream
from core.serving.loopback import LoopbackServer, listener_options
from tests.eval.gateway.conftest import UPSTREAM_KEY
from tests.eval.gateway.fake_upstream import Answer, FakeUpstream, completion
from tests.eval.gateway.helpers import chat_body, parse_sse, post_chat


def upstream(url: str, **kwargs: Any) -> OpenAICompatibleUpstream:
    return OpenAICompatibleUpstream(
        url, model_path="openai/gpt-5-mini", api_key=UPSTREAM_KEY, **kwargs
    )


async def test_non_streaming_answer_echoes_the_requested_model(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        body = chat_body(temperature=0.3, extra_body={"top_k": 5}, stream_options={"x": 1})
        response = await post_chat(client, gateway, body)

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    answer = response.json()
    assert answer == {
        "id": "chatcmpl-fake-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "osmosis-rollout",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "6"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
    }
    [seen] = fake.requests
    # The upstream gets the run's model without its provider prefix, the user's key, the
    # model parameters with extra_body merged in, and nothing of the envelope.
    assert seen.body == {
        "temperature": 0.3,
        "top_k": 5,
        "model": "gpt-5-mini",
        "messages": body["messages"],
    }
    assert seen.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


async def test_a_request_without_a_model_echoes_the_model_path(
    fake_url: str, client: httpx.AsyncClient
) -> None:
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        body = {"messages": [{"role": "user", "content": "hi"}]}
        response = await post_chat(client, gateway, body)
    assert response.json()["model"] == "openai/gpt-5-mini"


async def test_streaming_answer_is_ping_one_chunk_then_done(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    fake.hold = asyncio.Event()
    async with upstream(fake_url) as up, ModelGateway(up, heartbeat_sec=0.05) as gateway:
        call = asyncio.ensure_future(post_chat(client, gateway, chat_body(stream=True)))
        await fake.arrived.wait()
        await asyncio.sleep(0.3)  # several heartbeats while the upstream call runs
        fake.hold.set()
        response = await call

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    events = parse_sse(response.text)
    pings = [event for event in events if event.comment == "ping"]
    assert len(pings) >= 3
    assert events[: len(pings)] == pings, "heartbeats come before the chunk"
    chunk, done = events[len(pings) :]
    assert done.data == "[DONE]"
    assert chunk.json() == {
        "id": "chatcmpl-fake-1",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "osmosis-rollout",
        "choices": [{"index": 0, "delta": {"content": "6"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
    }
    assert "stream" not in fake.requests[0].body, "the upstream call itself never streams"


TOOL_CALLS = [
    {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": "{}"}},
    {"id": "call_b", "type": "function", "function": {"name": "mul", "arguments": "{}"}},
]


def _tool_answer(_seen: Any) -> Answer:
    extra = {
        "tool_calls": [{**call, "index": 7} for call in TOOL_CALLS],
        "provider_specific_fields": {"reasoning_content": "think first"},
        "refusal": None,
    }
    return Answer(body=completion(None, message_extra=extra, finish_reason="tool_calls"))


async def test_tool_calls_and_reasoning_in_both_answer_forms(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    fake.respond = _tool_answer
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        plain = (await post_chat(client, gateway, chat_body())).json()
        streamed = parse_sse((await post_chat(client, gateway, chat_body(stream=True))).text)

    assert plain["choices"][0] == {
        "index": 0,
        "message": {
            "role": "assistant",
            "content": "",
            "reasoning_content": "think first",
            "tool_calls": [{**call, "index": 7} for call in TOOL_CALLS],
        },
        "finish_reason": "tool_calls",
    }
    chunk = streamed[1].json()
    assert chunk["choices"][0] == {
        "index": 0,
        "delta": {
            "content": "",
            "reasoning_content": "think first",
            "tool_calls": [{**call, "index": n} for n, call in enumerate(TOOL_CALLS)],
        },
        "finish_reason": "tool_calls",
    }


async def test_reasoning_is_given_back_on_the_turn_that_called_the_tools(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    fake.respond = _tool_answer
    follow_up: dict[str, list[dict[str, Any]]] = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": TOOL_CALLS[1:]},
            {"role": "tool", "tool_call_id": "call_b", "content": "6"},
        ]
    }
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        await post_chat(client, gateway, chat_body())
        await post_chat(client, gateway, follow_up, rollout_id="other")
        await post_chat(client, gateway, follow_up)

    other, same = fake.requests[1].body["messages"], fake.requests[2].body["messages"]
    assert other == follow_up["messages"], "reasoning is kept per rollout"
    assert same[1] == {**follow_up["messages"][1], "reasoning_content": "think first"}
    assert same[::2] == follow_up["messages"][::2]


async def test_the_openai_sdk_reads_both_answer_forms(fake_url: str) -> None:
    openai = pytest.importorskip("openai")
    async with upstream(fake_url) as up, ModelGateway(up, heartbeat_sec=0.01) as gateway:
        sdk = openai.AsyncOpenAI(
            base_url=gateway.chat_completions_url("r1"), api_key=gateway.api_key, max_retries=0
        )
        async with sdk:
            plain = await sdk.chat.completions.create(
                model="osmosis-rollout", messages=[{"role": "user", "content": "2*3?"}]
            )
            stream = await sdk.chat.completions.create(
                model="osmosis-rollout",
                messages=[{"role": "user", "content": "2*3?"}],
                stream=True,
            )
            chunks = [chunk async for chunk in stream]

    assert plain.choices[0].message.content == "6"
    assert plain.usage is not None and plain.usage.total_tokens == 8
    [chunk] = chunks
    assert chunk.model == "osmosis-rollout"
    assert chunk.choices[0].delta.content == "6"
    assert chunk.choices[0].finish_reason == "stop"
    assert chunk.usage is not None and chunk.usage.total_tokens == 8


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", "Basic {key}", "Bearer {key}x", "bearer"],
)
async def test_a_missing_or_wrong_bearer_is_401(
    fake: FakeUpstream, fake_url: str, authorization: str | None
) -> None:
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        headers = {} if authorization is None else {"Authorization": authorization}
        headers = {k: v.format(key=gateway.api_key) for k, v in headers.items()}
        async with httpx.AsyncClient() as http:
            url = gateway.chat_completions_url("r1") + "/chat/completions"
            response = await http.post(url, json=chat_body(), headers=headers)
    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}
    assert fake.requests == []


async def test_the_scheme_word_is_case_insensitive(
    fake_url: str, client: httpx.AsyncClient
) -> None:
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        response = await post_chat(
            client, gateway, chat_body(), headers={"Authorization": f"BEARER {gateway.api_key}"}
        )
    assert response.status_code == 200


@pytest.mark.parametrize("segment", ["%2E%2E", "%2E", "a%5Cb", "a%00b"])
async def test_an_id_that_is_not_one_path_segment_is_422(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient, segment: str
) -> None:
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        url = f"{gateway.base_url}/v1/rollouts/{segment}/chat/completions"
        headers = {"Authorization": f"Bearer {gateway.api_key}"}
        response = await client.post(url, json=chat_body(), headers=headers)
        unauthorized = await client.post(url, json=chat_body())
    assert response.status_code == 422
    assert response.json() == {"detail": "invalid rollout_id"}
    assert unauthorized.status_code == 401, "the bearer is checked first"
    assert fake.requests == []


@pytest.mark.parametrize(
    "body",
    [
        b"[1, 2]",
        b"not json",
        b"",
        b'"text"',
        b"\xff\xfe",
        pytest.param(b"[" * 100_000, id="too-deep-to-parse"),
    ],
)
async def test_a_body_that_is_not_a_json_object_is_400(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient, body: bytes
) -> None:
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        response = await post_chat(client, gateway, body)
    assert response.status_code == 400
    assert response.json() == {"detail": "invalid body"}
    assert fake.requests == []


async def test_other_paths_and_methods_answer_in_the_same_shape(
    fake_url: str, client: httpx.AsyncClient
) -> None:
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        missing = await client.post(f"{gateway.base_url}/v1/chat/completions", json={})
        wrong_method = await client.get(gateway.chat_completions_url("r1") + "/chat/completions")
    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})
    assert (wrong_method.status_code, wrong_method.json()) == (
        405,
        {"detail": "Method Not Allowed"},
    )


async def test_more_than_one_choice_is_refused_before_the_upstream(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        response = await post_chat(client, gateway, chat_body(n=2))
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert response.json()["error"]["code"] == 400
    assert fake.requests == []


async def test_urls_fixed_port_and_advertised_base(fake_url: str) -> None:
    taken = LoopbackServer(FakeUpstream().app, **listener_options())
    port = int((await taken.start()).rsplit(":", 1)[1])
    try:
        async with upstream(fake_url) as up:
            with pytest.raises(GatewayError, match=f"127.0.0.1:{port}"):
                await ModelGateway(up, listener_port=port).start()
            await taken.stop()
            gateway = ModelGateway(up, listener_port=port, advertise_url="https://tunnel.test/")
            async with gateway:
                assert gateway.base_url == f"http://127.0.0.1:{port}"
                assert gateway.chat_completions_url("a b") == (
                    "https://tunnel.test/v1/rollouts/a%20b"
                )
                gateway.advertise_url = None
                assert gateway.chat_completions_url("r1") == (
                    f"http://127.0.0.1:{port}/v1/rollouts/r1"
                )
            with pytest.raises(GatewayError):
                _ = gateway.base_url
    finally:
        await taken.stop()


async def test_each_gateway_has_its_own_bearer(fake_url: str) -> None:
    async with upstream(fake_url) as up:
        first, second = ModelGateway(up), ModelGateway(up)
    assert first.api_key != second.api_key
    assert len(first.api_key) >= 32


async def test_a_slow_answer_behind_an_advertised_url_is_kept_warm(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    fake.hold = asyncio.Event()
    gateway_options: dict[str, Any] = {
        "advertise_url": None,
        "keepalive": True,
        "keepalive_grace_sec": 0.1,
        "keepalive_interval_sec": 0.05,
    }
    async with upstream(fake_url) as up, ModelGateway(up, **gateway_options) as gateway:
        call = asyncio.ensure_future(post_chat(client, gateway, chat_body()))
        await fake.arrived.wait()
        await asyncio.sleep(0.4)
        fake.hold.set()
        response = await call
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    leading = len(response.text) - len(response.text.lstrip(" "))
    assert leading >= 3, "spaces while the answer was pending"
    assert json.loads(response.text)["choices"][0]["message"]["content"] == "6"
