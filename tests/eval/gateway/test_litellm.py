"""The LiteLLM upstream against a local OpenAI-compatible fake (`openai/<name>` + `api_base`)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import httpx
import pytest

from core.eval.gateway.errors import LiteLLMUnavailable, PreflightError
from core.eval.gateway.litellm_upstream import (
    EXTRA,
    LiteLLMUpstream,
    litellm_available,
    load_litellm,
)
from core.eval.gateway.model_gateway import ModelGateway
from core.eval.gateway.upstreams import preflight
from core.eval.results.calls import ModelCall
from core.eval.results.logs import RunLog
from core.eval.session import run_logging
from tests.eval.gateway.conftest import UPSTREAM_KEY
from tests.eval.gateway.fake_upstream import Answer, FakeUpstream, completion, error
from tests.eval.gateway.helpers import chat_body, closed_port, parse_sse, post_chat

needs_litellm = pytest.mark.skipif(not litellm_available(), reason=f"needs {EXTRA}")


def test_without_the_extra_the_error_names_both_ways_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # makes `import litellm` fail
    with pytest.raises(LiteLLMUnavailable) as caught:
        load_litellm("openai/gpt-5-mini")
    message = str(caught.value)
    assert "'openai/gpt-5-mini'" in message
    assert EXTRA in message
    assert "--chat-url" in message
    assert "ROLLOUT_LLM_API_KEY" in message


@needs_litellm
async def test_plain_and_streamed_answers_through_litellm(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    ended: list[ModelCall] = []
    up = LiteLLMUpstream("openai/stub", api_base=fake_url, api_key=UPSTREAM_KEY)
    async with up, ModelGateway(up, on_call_end=ended.append) as gateway:
        plain = await post_chat(client, gateway, chat_body(temperature=0.2))
        streamed = await post_chat(client, gateway, chat_body(stream=True))
        assert gateway.tokens_for("r1") == 16

    answer = plain.json()
    assert plain.status_code == 200
    assert answer["object"] == "chat.completion"
    assert answer["model"] == "osmosis-rollout"
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "6"}
    assert answer["usage"] == {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}
    ping, chunk, done = parse_sse(streamed.text)
    assert (ping.comment, done.data) == ("ping", "[DONE]")
    assert chunk.json()["choices"] == [
        {"index": 0, "delta": {"content": "6"}, "finish_reason": "stop"}
    ]
    first = fake.requests[0]
    assert first.body["model"] == "stub"
    assert first.body["temperature"] == 0.2
    assert first.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert "stream" not in first.body or first.body["stream"] is False
    assert [call.cost_usd for call in ended] == [None, None], "LiteLLM has no price for 'stub'"


@needs_litellm
async def test_tool_calls_and_reasoning_survive_litellm(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    calls = [{"id": "call_a", "type": "function", "function": {"name": "add", "arguments": "{}"}}]
    extra = {"tool_calls": calls, "reasoning_content": "think first"}
    fake.respond = lambda _seen: Answer(
        body=completion(None, message_extra=extra, finish_reason="tool_calls")
    )
    async with (
        LiteLLMUpstream("openai/stub", api_base=fake_url, api_key="k") as up,
        ModelGateway(up) as gw,
    ):
        message = (await post_chat(client, gw, chat_body())).json()["choices"][0]["message"]
        chunk = parse_sse((await post_chat(client, gw, chat_body(stream=True))).text)[1].json()
    assert message["reasoning_content"] == "think first"
    assert [call["function"]["name"] for call in message["tool_calls"]] == ["add"]
    delta = chunk["choices"][0]["delta"]
    assert delta["reasoning_content"] == "think first"
    assert [call["index"] for call in delta["tool_calls"]] == [0]
    assert chunk["choices"][0]["finish_reason"] == "tool_calls"


@needs_litellm
async def test_a_known_model_gets_its_cost(fake_url: str, client: httpx.AsyncClient) -> None:
    ended: list[ModelCall] = []
    up = LiteLLMUpstream("openai/gpt-4o-mini", api_base=fake_url, api_key="k")
    async with up, ModelGateway(up, on_call_end=ended.append) as gateway:
        await post_chat(client, gateway, chat_body())
    [call] = ended
    assert call.cost_usd is not None and call.cost_usd > 0


@needs_litellm
async def test_provider_errors_keep_the_providers_status_and_body(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    answers = [
        error(401, f"Incorrect API key provided: {UPSTREAM_KEY}"),
        *[error(500, "boom", **{"retry-after-ms": "1"})] * 3,
    ]
    fake.respond = lambda _seen: answers.pop(0)
    up = LiteLLMUpstream("openai/stub", api_base=fake_url, api_key=UPSTREAM_KEY)
    async with up, ModelGateway(up) as gateway:
        refused = await post_chat(client, gateway, chat_body())
        failed = await post_chat(client, gateway, chat_body())
    assert refused.status_code == 401
    assert refused.json()["error"]["type"] == "bridge_error"
    assert "Incorrect API key provided: ***" in refused.json()["detail"]
    assert UPSTREAM_KEY not in refused.text
    assert failed.status_code == 502
    assert "boom" in failed.json()["detail"]


@needs_litellm
@pytest.mark.parametrize("field", ["api_base", "mock_response", "litellm_logging_obj", "_x"])
async def test_fields_that_would_reconfigure_litellm_are_refused(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient, field: str
) -> None:
    async with (
        LiteLLMUpstream("openai/stub", api_base=fake_url, api_key="k") as up,
        ModelGateway(up) as gw,
    ):
        response = await post_chat(client, gw, chat_body(**{field: "http://elsewhere"}))
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert field in response.json()["detail"]
    assert fake.requests == []


@needs_litellm
async def test_preflight_through_litellm(fake: FakeUpstream, fake_url: str) -> None:
    async with LiteLLMUpstream("openai/stub", api_base=fake_url, api_key="k") as up:
        assert await preflight(up) is None
        fake.respond = lambda _seen: error(429, "slow down", **{"retry-after-ms": "1"})
        warning = await preflight(up)
    assert warning is not None and "rate limited" in warning
    unreachable = f"http://127.0.0.1:{closed_port()}/v1"
    async with LiteLLMUpstream("openai/stub", api_base=unreachable, api_key="k") as up:
        with pytest.raises(PreflightError):
            await preflight(up)
    async with LiteLLMUpstream("no-provider-here") as up:
        with pytest.raises(PreflightError, match="provider/model"):
            await preflight(up)


@needs_litellm
async def test_litellms_info_lines_stay_out_of_stderr_and_the_log(
    fake_url: str, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    """A run's logging (what the headless front end runs under, `--verbose` streaming
    logs.txt to stderr) keeps LiteLLM's chatter below WARNING out, a line or two per call,
    from logs.txt and from the stderr handler LiteLLM adds to its own loggers; the run's own
    lines still reach logs.txt."""
    log = RunLog(tmp_path / "logs.txt")
    with run_logging(log):
        up = LiteLLMUpstream("openai/stub", api_base=fake_url, api_key=UPSTREAM_KEY)
        async with up, ModelGateway(up) as gateway:
            answer = await post_chat(client, gateway, chat_body())
            # LiteLLM's own stderr handler hangs on these: nothing below WARNING reaches it.
            for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
                assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
                assert logging.getLogger(name).isEnabledFor(logging.WARNING), name
        logging.getLogger("core.eval.session").info("ours, still logged")
    log.close()
    assert answer.status_code == 200
    logged = (tmp_path / "logs.txt").read_text()
    assert "ours, still logged" in logged
    assert "LiteLLM completion()" not in logged, logged
