"""What the gateway records per call: hooks, token sums, calls.jsonl, and no secret anywhere."""

from __future__ import annotations

import asyncio
import json
import logging
import stat
import time
from pathlib import Path

import httpx
import pytest

from core.eval.gateway.model_gateway import ModelGateway
from core.eval.gateway.upstreams import OpenAICompatibleUpstream
from core.eval.redact import Redactor
from core.eval.results.calls import TEXT_LIMIT, CallLog, ModelCall, bounded
from tests.eval.gateway.conftest import UPSTREAM_KEY
from tests.eval.gateway.fake_upstream import Answer, FakeUpstream, Seen, completion, error
from tests.eval.gateway.helpers import chat_body, post_chat


def upstream(url: str) -> OpenAICompatibleUpstream:
    return OpenAICompatibleUpstream(url, model_path="openai/gpt-5-mini", api_key=UPSTREAM_KEY)


async def test_hooks_see_a_call_in_flight_then_its_outcome(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    fake.hold = asyncio.Event()
    started: list[ModelCall] = []
    ended: list[ModelCall] = []
    up = upstream(fake_url)
    gateway = ModelGateway(up, on_call_start=started.append, on_call_end=ended.append)
    async with up, gateway:
        before = time.time()
        call = asyncio.ensure_future(
            post_chat(client, gateway, chat_body("What is 2 * 3?", stream=True), rollout_id="r7")
        )
        await fake.arrived.wait()
        await asyncio.sleep(0.05)
        [in_flight] = gateway.in_flight
        assert started == [in_flight]
        assert ended == []
        assert in_flight.in_flight and in_flight.latency_sec is None
        assert in_flight.elapsed() >= 0.05
        assert (in_flight.rollout_id, in_flight.streamed) == ("r7", True)
        assert in_flight.requested_model == "osmosis-rollout"
        assert in_flight.request_text == "What is 2 * 3?"
        assert before <= in_flight.started_at <= time.time()
        fake.hold.set()
        await call

    assert gateway.in_flight == ()
    [done] = ended
    assert done.call_id == in_flight.call_id == 1
    assert not done.in_flight
    assert done.latency_sec is not None and done.latency_sec >= 0.05
    assert done.ended_at is not None and done.ended_at >= done.started_at
    assert (done.status, done.upstream_status, done.error) == (200, 200, None)
    assert (done.prompt_tokens, done.completion_tokens, done.total_tokens) == (7, 1, 8)
    assert done.reply_text == "6"
    assert done.cost_usd is None


async def test_tokens_are_summed_per_rollout(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    usages = [
        {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        {"input_tokens": 3, "output_tokens": 4},
        {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    ]
    answers = [Answer(body=completion(usage=usage)) for usage in usages]
    answers.insert(2, error(400, "bad request"))
    no_usage = completion()
    del no_usage["usage"]
    answers.append(Answer(body=no_usage))
    fake.respond = lambda _seen: answers.pop(0)
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        await post_chat(client, gateway, chat_body(), rollout_id="a")
        await post_chat(client, gateway, chat_body(stream=True), rollout_id="a")
        await post_chat(client, gateway, chat_body(), rollout_id="a")  # failed: no usage
        await post_chat(client, gateway, chat_body(), rollout_id="b")
        await post_chat(client, gateway, chat_body(), rollout_id="c")  # answered without usage
        assert gateway.tokens_for("a") == 15 + 7
        assert gateway.tokens_for("b") == 2
        assert gateway.tokens_for("c") is None
        assert gateway.tokens_for("never") is None
        gateway.forget("a")
        assert gateway.tokens_for("a") is None


@pytest.mark.parametrize(
    "odd", ["Infinity", "NaN", "-Infinity", "-3", "2.5", "1e30", str(10**30), '"12"', "true"]
)
async def test_usage_counts_that_are_no_counts_are_unknown_with_a_warning(
    fake: FakeUpstream,
    fake_url: str,
    client: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    odd: str,
) -> None:
    # Raw text: the non-standard tokens only a hand-written body can hold. int(Infinity) used
    # to fail the call; a negative count was summed into the rollout's tokens.
    usage = f'{{"prompt_tokens": 7, "completion_tokens": {odd}, "total_tokens": {odd}}}'
    text = json.dumps(completion()).replace(json.dumps(completion()["usage"]), usage)
    fake.respond = lambda _seen: Answer(text=text, headers={"content-type": "application/json"})
    ended: list[ModelCall] = []
    caplog.set_level(logging.WARNING, logger="core.eval.gateway.model_gateway")
    async with upstream(fake_url) as up, ModelGateway(up, on_call_end=ended.append) as gateway:
        plain = await post_chat(client, gateway, chat_body(), rollout_id="a")
        streamed = await post_chat(client, gateway, chat_body(stream=True), rollout_id="a")
        assert gateway.tokens_for("a") is None
    assert plain.status_code == streamed.status_code == 200
    # The rollout still gets a usage an OpenAI client parses: the unknown counts as 0.
    assert plain.json()["usage"] == {"prompt_tokens": 7, "completion_tokens": 0, "total_tokens": 0}
    assert "Infinity" not in streamed.text and "NaN" not in streamed.text
    assert [(call.prompt_tokens, call.completion_tokens, call.total_tokens) for call in ended] == [
        (7, None, None)
    ] * 2
    assert caplog.text.count("model call for rollout a: usage.completion_tokens = ") == 2
    assert "is not a token count (a whole number from 0 to 9007199254740991)" in caplog.text


@pytest.mark.parametrize("odd", ["Infinity", "NaN", "-1", "true"])
async def test_a_created_time_that_is_no_time_is_answered_as_now(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient, odd: str
) -> None:
    text = json.dumps(completion()).replace('"created": 1700000000', f'"created": {odd}')
    fake.respond = lambda _seen: Answer(text=text, headers={"content-type": "application/json"})
    before = int(time.time())
    async with upstream(fake_url) as up, ModelGateway(up) as gateway:
        response = await post_chat(client, gateway, chat_body())
    assert response.status_code == 200
    assert before <= response.json()["created"] <= time.time()


async def test_a_failing_hook_does_not_fail_the_call(
    fake_url: str, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[ModelCall] = []

    def broken(call: ModelCall) -> None:
        seen.append(call)
        raise RuntimeError("board is broken")

    up = upstream(fake_url)
    gateway = ModelGateway(up, on_call_start=broken, on_call_end=broken)
    async with up, gateway:
        response = await post_chat(client, gateway, chat_body())
    assert response.status_code == 200
    assert [call.in_flight for call in seen] == [True, False], "the end hook still runs"
    assert caplog.text.count("a model-call hook failed") == 2


def test_record_texts_are_bounded() -> None:
    assert bounded("x" * TEXT_LIMIT) == "x" * TEXT_LIMIT
    long = bounded("y" * (TEXT_LIMIT + 5))
    assert len(long) == TEXT_LIMIT and long.endswith("…")


async def test_request_and_reply_texts_are_bounded(
    fake: FakeUpstream, fake_url: str, client: httpx.AsyncClient
) -> None:
    fake.respond = lambda _seen: Answer(body=completion("z" * 5000))
    ended: list[ModelCall] = []
    async with upstream(fake_url) as up, ModelGateway(up, on_call_end=ended.append) as gateway:
        await post_chat(client, gateway, chat_body("q" * 5000))
    [call] = ended
    assert call.request_text == bounded("q" * 5000)
    assert call.reply_text == bounded("z" * 5000)


async def test_the_call_log_appends_one_line_per_finished_call(
    fake_url: str, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    path = tmp_path / "calls.jsonl"
    origin = time.monotonic()
    with CallLog(path, origin=origin) as log:
        up = upstream(fake_url)
        async with up, ModelGateway(up, on_call_start=log.append, on_call_end=log.append) as gw:
            await post_chat(client, gw, chat_body(), rollout_id="r1")
            await post_chat(client, gw, chat_body(stream=True), rollout_id="r2")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert first["kind"] == "model_call"
    assert (first["call_id"], first["rollout_id"], first["streamed"]) == (1, "r1", False)
    assert (second["call_id"], second["rollout_id"], second["streamed"]) == (2, "r2", True)
    assert first["status"] == 200 and first["upstream_status"] == 200
    assert first["total_tokens"] == 8 and first["reply"] == "6"
    assert first["model"] == "osmosis-rollout"
    assert 0 <= first["t"] <= second["t"]
    assert first["started_at"].endswith("Z") and first["ended_at"] >= first["started_at"]
    assert first["latency_s"] >= 0
    assert "error" not in first and "cost_usd" not in first, "absent values are left out"


def test_the_call_log_narrows_an_existing_file_and_appends(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    path.write_text('{"kind":"model_call","call_id":0}\n')
    path.chmod(0o644)
    call = ModelCall(1, "r", False, "m", time.time(), time.monotonic(), "hi")
    finished = ModelCall(
        2, "r", False, "m", time.time(), 1.0, "hi", ended_at=time.time(), ended_monotonic=2.0
    )
    with CallLog(path) as log:
        log.append(call)  # in flight: not a finished call
        log.append(finished)
    lines = path.read_text().splitlines()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [json.loads(line)["call_id"] for line in lines] == [0, 2]
    assert "t" not in json.loads(lines[1]), "no origin, no t"


async def test_no_secret_reaches_answers_records_files_or_logs(  # noqa: PLR0917
    fake: FakeUpstream,
    fake_url: str,
    client: httpx.AsyncClient,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    provider_key = "provider-key-from-secrets-file"
    monkeypatch.setenv("ANTHROPIC_API_KEY", provider_key)
    session_secret = "the-session-secret-value"
    replies = iter(range(100))

    def echo(seen: Seen) -> Answer:
        # A hostile or careless upstream: it repeats the key, the bearer it was never given
        # (taken from the rollout's message) and the provider key, in errors and replies.
        said = seen.body["messages"][-1]["content"]
        leak = f"{seen.headers['authorization']} {said} {provider_key} {session_secret}"
        if next(replies) % 2:
            return error(401, f"Incorrect API key provided: {leak}")
        return Answer(body=completion(f"your key is {leak}"))

    fake.respond = echo
    ended: list[ModelCall] = []
    path = tmp_path / "calls.jsonl"
    with CallLog(path) as log:

        def call_ended(call: ModelCall) -> None:
            ended.append(call)
            log.append(call)

        async with upstream(fake_url) as up:
            gateway = ModelGateway(
                up,
                redact=Redactor([session_secret]),
                on_call_end=call_ended,
            )
            async with gateway:
                bearer = gateway.api_key
                texts = []
                for stream in (False, False, True, True):
                    body = chat_body(f"my bearer is {bearer}", stream=stream)
                    response = await post_chat(client, gateway, body)
                    texts.append(response.text)

    assert len(ended) == 4
    assert [call.status for call in ended] == [200, 401, 200, 401]
    secrets = (UPSTREAM_KEY, bearer, provider_key, session_secret)
    records = [json.dumps(call.to_record()) for call in ended]
    error_answers = [texts[1], texts[3]]
    for text in [*records, path.read_text(), caplog.text, *error_answers]:
        for secret in secrets:
            assert secret not in text
    assert "***" in ended[1].error  # type: ignore[operator]
    assert ended[0].request_text == "my bearer is ***"
