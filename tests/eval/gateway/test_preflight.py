"""The preflight call: a bad model, key or address stops the run; a rate limit only warns."""

from __future__ import annotations

import pytest

from core.eval.gateway.errors import GatewayError, PreflightError
from core.eval.gateway.upstreams import OpenAICompatibleUpstream, preflight
from tests.eval.gateway.conftest import UPSTREAM_KEY
from tests.eval.gateway.fake_upstream import FakeUpstream, error
from tests.eval.gateway.helpers import closed_port


def upstream(url: str) -> OpenAICompatibleUpstream:
    return OpenAICompatibleUpstream(
        url, model_path="openai/gpt-5-mini", api_key=UPSTREAM_KEY, max_retries=0
    )


async def test_a_working_model_passes_with_one_tiny_call(fake: FakeUpstream, fake_url: str) -> None:
    async with upstream(fake_url) as up:
        assert await preflight(up) is None
    [seen] = fake.requests
    assert seen.body == {
        "max_tokens": 256,
        "model": "gpt-5-mini",
        "messages": [{"role": "user", "content": "hi"}],
    }


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_a_refused_key_or_unknown_model_stops_the_run(
    fake: FakeUpstream, fake_url: str, status: int
) -> None:
    fake.respond = lambda _seen: error(status, f"Incorrect API key provided: {UPSTREAM_KEY}")
    async with upstream(fake_url) as up:
        with pytest.raises(PreflightError) as caught:
            await preflight(up)
    message = str(caught.value)
    assert isinstance(caught.value, GatewayError)
    assert message.startswith(f"model preflight for 'openai/gpt-5-mini' failed (HTTP {status})")
    assert "Incorrect API key provided: ***" in message, "the upstream's message, masked"
    assert UPSTREAM_KEY not in message


async def test_an_unreachable_upstream_stops_the_run() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    async with upstream(url) as up:
        with pytest.raises(PreflightError, match="cannot reach the model"):
            await preflight(up)


@pytest.mark.parametrize(("status", "kind"), [(429, "rate limited"), (500, "HTTP 502")])
async def test_a_rate_limit_or_provider_fault_only_warns(
    fake: FakeUpstream, fake_url: str, status: int, kind: str
) -> None:
    fake.respond = lambda _seen: error(status, "try later")
    async with upstream(fake_url) as up:
        warning = await preflight(up)
    assert warning is not None
    assert warning.startswith(f"model preflight for 'openai/gpt-5-mini': {kind}: ")
    assert "try later" in warning
