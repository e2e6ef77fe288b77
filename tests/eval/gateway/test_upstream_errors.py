"""Upstream failures become OpenAI-style error answers with the official statuses."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from core.eval.gateway.model_gateway import ModelGateway
from core.eval.gateway.upstreams import OpenAICompatibleUpstream
from core.eval.results.calls import ModelCall
from server_stub.llm import create_chat_app
from server_stub.llm_behaviour import BEHAVIOUR_HEADER, StubChatSettings
from server_stub.llm_latency import FixedLatency
from tests.compressed_bombs import bomb, bomb_server
from tests.conftest import Serve
from tests.eval.gateway.conftest import UPSTREAM_KEY
from tests.eval.gateway.fake_upstream import Answer, FakeUpstream, Seen, completion, error
from tests.eval.gateway.helpers import chat_body, closed_port, parse_sse, post_chat

UPSTREAM_500 = '{"error":{"message":"boom","type":"fake_error","code":null}}'


def upstream(
    url: str, *, timeout: httpx.Timeout | None = None, max_retries: int = 2
) -> OpenAICompatibleUpstream:
    return OpenAICompatibleUpstream(
        url,
        model_path="openai/gpt-5-mini",
        api_key=UPSTREAM_KEY,
        timeout=timeout or httpx.Timeout(30.0),
        max_retries=max_retries,
    )


async def test_an_upstream_500_is_retried_then_answered_502(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    fake.respond = lambda _seen: error(500, "boom", **{"retry-after-ms": "10"})
    ended: list[ModelCall] = []
    async with upstream(fake_url) as up, ModelGateway(up, on_call_end=ended.append) as gateway:
        response = await post_chat(client, gateway, chat_body())
    assert response.status_code == 502
    assert response.json() == {
        "error": {"message": UPSTREAM_500, "type": "bridge_error", "code": 502},
        "detail": UPSTREAM_500,
    }
    assert len(fake.requests) == 3, "two retries, as the OpenAI SDK under LiteLLM makes"
    [call] = ended
    assert (call.status, call.upstream_status, call.error) == (502, 500, UPSTREAM_500)


async def test_an_upstream_4xx_keeps_its_status_and_is_not_retried(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    fake.respond = lambda _seen: error(404, "no such model")
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        response = await post_chat(client, gateway, chat_body())
    assert response.status_code == 404
    assert response.json()["error"]["code"] == 404
    assert response.json()["error"]["type"] == "bridge_error"
    assert "no such model" in response.json()["detail"]
    assert len(fake.requests) == 1


async def test_a_rate_limit_is_retried_as_the_server_asks(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    answers = [error(429, "slow down", **{"retry-after": "0.01"}), Answer(body=None)]

    def respond(_seen: Seen) -> Answer:
        answer = answers.pop(0)
        return Answer(body=completion()) if answer.body is None else answer

    fake.respond = respond
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        response = await post_chat(client, gateway, chat_body())
    assert response.status_code == 200
    assert len(fake.requests) == 2


async def test_a_timeout_is_answered_408(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    fake.hold = asyncio.Event()  # never set: the upstream does not answer
    up = upstream(fake_url, timeout=httpx.Timeout(0.2), max_retries=0)
    async with up, ModelGateway(up) as gateway:
        response = await post_chat(client, gateway, chat_body())
        await asyncio.sleep(0.1)
    assert response.status_code == 408
    assert response.json()["error"] == {
        "message": "the model did not answer in time (ReadTimeout)",
        "type": "bridge_error",
        "code": 408,
    }
    assert fake.disconnects == 1, "the abandoned upstream call was closed"


async def test_a_refused_connection_is_answered_502(client: httpx.AsyncClient) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    async with upstream(url, max_retries=0) as up, ModelGateway(up) as gateway:
        response = await post_chat(client, gateway, chat_body())
    assert response.status_code == 502
    assert response.json()["error"]["message"].startswith(f"cannot reach the model at {url}")


async def test_an_answer_that_is_not_a_completion_is_502(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    bodies = [
        Answer(text="<html>oops</html>"),
        Answer(text="[" * 100_000),  # too deep to parse
        Answer(body={"choices": []}),
    ]
    fake.respond = lambda _seen: bodies.pop(0)
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        not_json = await post_chat(client, gateway, chat_body())
        too_deep = await post_chat(client, gateway, chat_body())
        no_choices = await post_chat(client, gateway, chat_body())
    assert not_json.status_code == too_deep.status_code == 502
    assert "not a JSON object" in not_json.json()["detail"]
    assert "not a JSON object" in too_deep.json()["detail"]
    assert no_choices.status_code == 502
    assert "no choices" in no_choices.json()["detail"]


async def test_a_streamed_call_that_fails_ends_with_an_error_event(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    fake.respond = lambda _seen: error(401, "bad key")
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        response = await post_chat(client, gateway, chat_body(stream=True))
    assert response.status_code == 200, "the stream had begun"
    ping, failure, done = parse_sse(response.text)
    assert ping.comment == "ping"
    assert failure.event == "error"
    assert failure.json()["error"]["code"] == 401
    assert done.data == "[DONE]"


async def test_a_rollout_that_leaves_ends_the_upstream_call(
    fake: FakeUpstream, fake_url: str
) -> None:
    fake.hold = asyncio.Event()
    ended: list[ModelCall] = []
    async with upstream(fake_url) as up, ModelGateway(up, on_call_end=ended.append) as gateway:
        for stream in (False, True):
            fake.arrived.clear()
            async with httpx.AsyncClient() as http:
                call = asyncio.ensure_future(post_chat(http, gateway, chat_body(stream=stream)))
                await fake.arrived.wait()
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
            for _ in range(200):
                if len(ended) == (2 if stream else 1) and fake.disconnects == len(ended):
                    break
                await asyncio.sleep(0.01)
        assert gateway.in_flight == ()
    assert [(call.streamed, call.status) for call in ended] == [(False, None), (True, None)]
    assert all(call.error and call.error.startswith("abandoned") for call in ended)
    assert fake.disconnects == 2


async def test_the_stub_model_obeys_forwarded_behaviour_headers(
    serve: Serve, client: httpx.AsyncClient
) -> None:
    stub = create_chat_app(StubChatSettings(latency=FixedLatency(0.0)), api_key=UPSTREAM_KEY)
    async with serve(stub) as url:

        def stub_upstream() -> OpenAICompatibleUpstream:
            return OpenAICompatibleUpstream(
                url, model_path="osmosis-stub", api_key=UPSTREAM_KEY, max_retries=0
            )

        async with stub_upstream() as up:
            async with ModelGateway(up, forward_headers=[BEHAVIOUR_HEADER]) as gateway:
                answer = await post_chat(client, gateway, chat_body("What is 17 * 23?"))
                failed = await post_chat(
                    client, gateway, chat_body(), headers={BEHAVIOUR_HEADER: "error"}
                )
            async with ModelGateway(up) as unforwarded:
                ignored = await post_chat(
                    client, unforwarded, chat_body(), headers={BEHAVIOUR_HEADER: "error"}
                )
    assert answer.json()["choices"][0]["message"]["content"] == "391"
    assert failed.status_code == 502
    assert "injected fault" in failed.json()["detail"]
    assert ignored.status_code == 200


async def test_an_answer_inflating_past_the_cap_is_refused(client: httpx.AsyncClient) -> None:
    """Issue 30 §8: a gzip answer of ~256 KiB inflating to a 256 MiB completion (padded with
    spaces, valid JSON) is not inflated past 64 MiB: 502, the completion never read. Before,
    the gateway inflated and parsed it whole, and answered it."""
    padded = json.dumps(completion()).encode()
    answer = bomb("gzip", prefix=padded[:-1], suffix=b"}")
    async with (
        bomb_server("gzip", answer) as url,
        upstream(f"{url}/v1", max_retries=0) as up,
        ModelGateway(up) as gateway,
    ):
        response = await post_chat(client, gateway, chat_body())
    assert response.status_code == 502
    assert "once inflated" in response.json()["detail"]
