"""The stub chat endpoint, served by a real uvicorn on a loopback port and called with httpx.

Streamed answers (`stream` true) have their own tests in test_llm_stream.py.
"""

from __future__ import annotations

import logging
import random
import time
from fractions import Fraction
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from core.serving.loopback import serve_in_loop
from server_stub.llm import DEFAULT_MODEL, create_chat_app
from server_stub.llm_answers import count_tokens, format_number, solve_arithmetic
from server_stub.llm_behaviour import (
    BEHAVIOUR_HEADER,
    HANG_LIMIT_SEC,
    Behaviour,
    StubChatSettings,
    parse_behaviour,
    plan_request,
)
from server_stub.llm_latency import FixedLatency, LogNormalLatency, UniformLatency
from tests.server.chat import AUTH, KEY, ask, chat, hung_call_dropped, outcomes

# --- pure helpers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is 17 * 23?", "391"),
        ("17*23", "391"),
        ("17 x 23", "391"),
        ("17 X 23", "391"),
        ("What is 17 times 23?", "391"),
        ("What is 2.5 + 0.25?", "2.75"),
        ("10 - 25", "-15"),
        ("-3 * -4", "12"),
        ("7 / 2", "3.5"),
        ("9 divided by 3", "3"),
        ("What is 1.5 * 4?", "6"),
        ("1 / 3", "0.3333333333"),
        ("Question 2: what is 6 plus 4?", "10"),
    ],
)
def test_solves_binary_arithmetic(question: str, expected: str) -> None:
    value = solve_arithmetic(question)
    assert value is not None
    assert format_number(value) == expected


def test_no_arithmetic_or_zero_divisor_gives_none() -> None:
    assert solve_arithmetic("Tell me a joke") is None
    assert solve_arithmetic("What is 5 / 0?") is None
    assert format_number(Fraction(-7, 4)) == "-1.75"


def test_token_count_is_words_and_punctuation() -> None:
    assert count_tokens("What is 17 * 23?") == 6
    assert count_tokens("") == 0
    assert count_tokens("Hello, world!") == 4


def test_behaviour_header_parsing() -> None:
    assert parse_behaviour(None) == Behaviour()
    assert parse_behaviour("error") == Behaviour(outcome="error")
    assert parse_behaviour(" Wrong , slow:0.5 ") == Behaviour(outcome="wrong", delay=0.5)
    assert parse_behaviour("hang") == Behaviour(delay=HANG_LIMIT_SEC)
    for bad in ("explode", "slow:", "slow:abc", "slow:-1", "slow:inf"):
        with pytest.raises(ValueError):
            parse_behaviour(bad)


def test_latency_models_respect_their_parameters() -> None:
    assert FixedLatency(0.25).sample(0.9) == 0.25
    uniform = UniformLatency(0.1, 0.3)
    assert uniform.sample(0.0) == pytest.approx(0.1)
    assert uniform.sample(0.5) == pytest.approx(0.2)
    lognormal = LogNormalLatency(median=0.1, p99=0.5)
    assert lognormal.sample(0.5) == pytest.approx(0.1)
    assert lognormal.sample(0.99) == pytest.approx(0.5)
    assert lognormal.sample(0.0) > 0
    rng = random.Random(1)
    draws = sorted(lognormal.sample(rng.random()) for _ in range(20_000))
    assert draws[10_000] == pytest.approx(0.1, rel=0.05)
    assert draws[19_800] == pytest.approx(0.5, rel=0.1)
    capped = LogNormalLatency(median=0.1, p99=0.5, floor=0.05, cap=0.2)
    assert capped.sample(0.0) == 0.05
    assert capped.sample(1.0) == 0.2


@pytest.mark.parametrize(
    "build",
    [
        lambda: FixedLatency(-1),
        lambda: UniformLatency(0.3, 0.1),
        lambda: LogNormalLatency(median=0.0, p99=1.0),
        lambda: LogNormalLatency(median=0.5, p99=0.1),
        lambda: LogNormalLatency(median=0.1, p99=0.2, floor=0.5, cap=0.1),
        lambda: StubChatSettings(error_rate=1.5),
        lambda: StubChatSettings(wrong_answer_rate=-0.1),
        lambda: create_chat_app(api_key="  "),
    ],
)
def test_invalid_knobs_are_rejected(build: Any) -> None:
    with pytest.raises(ValueError):
        build()


def test_every_plan_draws_four_numbers() -> None:
    settings = StubChatSettings(error_rate=0.5)
    rng, twin = random.Random(3), random.Random(3)
    plan_request(settings, rng, Behaviour(outcome="ok", delay=1.0))
    for _ in range(4):
        twin.random()
    assert rng.random() == twin.random()


# --- over HTTP ----------------------------------------------------------------------------------


async def test_answers_multiplication_with_the_number_only(
    stub: tuple[str, httpx.AsyncClient],
) -> None:
    url, client = stub
    for question in ("What is 17 * 23?", "17*23", "17 x 23", "17 times 23"):
        response = await chat(client, url, question)
        assert response.status_code == 200
        message = response.json()["choices"][0]["message"]
        assert message == {"role": "assistant", "content": "391"}, question


async def test_response_has_the_openai_shape_and_usage(stub: tuple[str, httpx.AsyncClient]) -> None:
    url, client = stub
    body = {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Reply with the number only."},
            {"role": "user", "content": [{"type": "text", "text": "What is 2.5 + 0.25?"}]},
        ],
    }
    before = int(time.time())
    response = await client.post(f"{url}/v1/chat/completions", json=body, headers=AUTH)
    assert response.status_code == 200
    data = response.json()
    assert data["object"] == "chat.completion"
    assert data["id"].startswith("chatcmpl-")
    assert data["model"] == "gpt-test"
    assert before <= data["created"] <= int(time.time())
    choice = data["choices"][0]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "stop"
    assert choice["message"] == {"role": "assistant", "content": "2.75"}
    # System: 6 words + "." ; user: What is 2 . 5 + 0 . 25 ? = 10; reply: 2 . 75 = 3.
    assert data["usage"] == {"prompt_tokens": 16, "completion_tokens": 3, "total_tokens": 19}


async def test_non_arithmetic_gets_a_short_fixed_reply_and_default_model(
    stub: tuple[str, httpx.AsyncClient],
) -> None:
    url, client = stub
    body = {"messages": [{"role": "user", "content": "Tell me a story"}]}
    replies = []
    for _ in range(2):
        response = await client.post(f"{url}/chat/completions", json=body, headers=AUTH)
        assert response.status_code == 200
        assert response.json()["model"] == DEFAULT_MODEL
        replies.append(response.json()["choices"][0]["message"]["content"])
    assert replies[0] == replies[1]
    assert 0 < len(replies[0]) < 100


async def test_any_base_path_reaches_the_endpoint(
    chat_app: Starlette, stub: tuple[str, httpx.AsyncClient]
) -> None:
    url, client = stub
    paths = ("", "/v1", "/v1/rollouts/9b1d0c", "/a/b/c/d")
    for path in paths:
        response = await chat(client, url, path=path)
        assert response.status_code == 200, path
        assert response.json()["choices"][0]["message"]["content"] == "391"
    assert chat_app.state.stats.completions == len(paths)


async def test_other_paths_and_methods_are_not_served(stub: tuple[str, httpx.AsyncClient]) -> None:
    url, client = stub
    assert (await client.post(f"{url}/v1/completions", json=ask("1+1"))).status_code == 404
    assert (await client.get(f"{url}/v1/chat/completions", headers=AUTH)).status_code == 405


async def test_bearer_is_required_when_configured(
    chat_app: Starlette, stub: tuple[str, httpx.AsyncClient]
) -> None:
    url, client = stub
    attempts: list[dict[str, str]] = [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"bearer {KEY}"},
        {"Authorization": KEY},
        {"Authorization": f"Bearer {KEY}x"},
    ]
    for headers in attempts:
        response = await client.post(f"{url}/v1/chat/completions", json=ask("1+1"), headers=headers)
        assert response.status_code == 401, headers
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["code"] == "invalid_api_key"
        assert KEY not in response.text
    assert chat_app.state.stats.rejected == len(attempts)
    assert chat_app.state.stats.completions == 0


async def test_without_a_key_no_bearer_is_needed() -> None:
    async with serve_in_loop(create_chat_app()) as url, httpx.AsyncClient() as client:
        response = await client.post(f"{url}/chat/completions", json=ask("6 * 7"))
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "42"


async def test_bad_requests_get_400(
    chat_app: Starlette, stub: tuple[str, httpx.AsyncClient]
) -> None:
    url, client = stub
    post = f"{url}/v1/chat/completions"
    assert (await client.post(post, content=b"{not json", headers=AUTH)).status_code == 400
    assert (await client.post(post, json={"messages": "hi"}, headers=AUTH)).status_code == 400
    for stream in ("yes", 1):
        bad_stream = await client.post(post, json=ask("1+1", stream=stream), headers=AUTH)
        assert bad_stream.status_code == 400, stream
    unknown = await chat(client, url, headers={BEHAVIOUR_HEADER: "explode"})
    assert unknown.status_code == 400
    assert "explode" in unknown.json()["error"]["message"]
    assert chat_app.state.stats.rejected == 5


async def test_error_override_answers_500(
    chat_app: Starlette, stub: tuple[str, httpx.AsyncClient]
) -> None:
    url, client = stub
    response = await chat(client, url, headers={BEHAVIOUR_HEADER: "error"})
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "server_error"
    assert chat_app.state.stats.errors == 1
    assert chat_app.state.stats.requests == 1


async def test_wrong_override_is_off_by_a_little(
    chat_app: Starlette, stub: tuple[str, httpx.AsyncClient]
) -> None:
    url, client = stub
    answers = []
    for _ in range(8):
        response = await chat(client, url, headers={BEHAVIOUR_HEADER: "wrong"})
        answers.append(int(response.json()["choices"][0]["message"]["content"]))
    assert all(1 <= abs(answer - 391) <= 2 for answer in answers)
    assert chat_app.state.stats.wrong_answers == 8


async def test_slow_override_delays_the_answer(stub: tuple[str, httpx.AsyncClient]) -> None:
    url, client = stub
    started = time.monotonic()
    response = await chat(client, url, headers={BEHAVIOUR_HEADER: "slow:0.3"})
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "391"
    assert 0.3 <= elapsed < 2.0


async def test_hang_lasts_until_the_client_gives_up(chat_app: Starlette) -> None:
    started = time.monotonic()
    async with serve_in_loop(chat_app) as url:
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.ReadTimeout):
                await chat(client, url, headers={BEHAVIOUR_HEADER: "hang"}, timeout=0.3)
        # The server notices the disconnect, so shutting down does not wait for the hang.
        await hung_call_dropped(chat_app)
    assert time.monotonic() - started < 3.0


async def test_latency_knob_applies_to_every_request() -> None:
    app = create_chat_app(StubChatSettings(latency=UniformLatency(0.1, 0.15)))
    async with serve_in_loop(app) as url, httpx.AsyncClient() as client:
        started = time.monotonic()
        response = await client.post(f"{url}/chat/completions", json=ask("2+2"))
        elapsed = time.monotonic() - started
    assert response.json()["choices"][0]["message"]["content"] == "4"
    assert 0.1 <= elapsed < 1.0


async def test_seeded_fault_rates_replay_identically() -> None:
    settings = StubChatSettings(error_rate=0.3, wrong_answer_rate=0.3, seed=123)
    first = await outcomes(settings, 12)
    again = await outcomes(settings, 12)
    assert first == again
    errors = sum(status == 500 for status, _ in first)
    wrong = sum(status == 200 and answer != "391" for status, answer in first)
    right = sum(answer == "391" for _, answer in first)
    assert min(errors, wrong, right) > 0


def test_another_seed_gives_another_sequence() -> None:
    def planned(seed: int) -> list[str]:
        settings = StubChatSettings(error_rate=0.3, wrong_answer_rate=0.3, seed=seed)
        rng = random.Random(settings.seed)
        return [plan_request(settings, rng, Behaviour()).outcome for _ in range(40)]

    assert planned(123) == planned(123)
    assert planned(123) != planned(124)
    assert set(planned(123)) == {"ok", "error", "wrong"}


async def test_ok_override_beats_the_fault_rates() -> None:
    app = create_chat_app(StubChatSettings(error_rate=1.0, wrong_answer_rate=1.0))
    async with serve_in_loop(app) as url, httpx.AsyncClient() as client:
        forced = await client.post(
            f"{url}/chat/completions", json=ask("3*3"), headers={BEHAVIOUR_HEADER: "ok"}
        )
        default = await client.post(f"{url}/chat/completions", json=ask("3*3"))
    assert forced.json()["choices"][0]["message"]["content"] == "9"
    assert default.status_code == 500


async def test_the_api_key_is_never_logged(
    stub: tuple[str, httpx.AsyncClient], caplog: pytest.LogCaptureFixture
) -> None:
    url, client = stub
    with caplog.at_level(logging.DEBUG):
        await chat(client, url)
        await chat(client, url, headers={"Authorization": f"Bearer {KEY}-wrong"})
    assert any("chat/completions" in record.getMessage() for record in caplog.records)
    assert KEY not in caplog.text
