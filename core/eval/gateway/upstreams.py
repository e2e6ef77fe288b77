"""Where the model gateway sends a rollout's chat call: the `ChatUpstream` interface.

An upstream takes the rollout's chat-completions body and returns the provider's completion
as a plain JSON object (`UpstreamReply`), or raises `UpstreamError` carrying the status to
answer with and a message that is already masked. It never streams: the gateway turns a
whole completion into the rollout's SSE answer itself.

- `OpenAICompatibleUpstream`: any OpenAI-compatible server (`--chat-url URL`, and the demo's
  stub model), over one pooled `httpx.AsyncClient`. It sends `model` = `model_path` without
  its provider prefix and retries as the OpenAI SDK under LiteLLM does (twice, on 408, 409,
  429, 5xx, timeouts and failed connections, 0.5 s doubling, or as `retry-after` says).
- `LiteLLMUpstream` (`core.eval.gateway.litellm_upstream`): `model_path` through LiteLLM, when the
  `osmosis-tui[litellm]` extra is installed.

`preflight(upstream)` makes one tiny call before a run, so that a bad model or key fails once
instead of in every rollout.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import re
import time
from collections.abc import Iterable, Mapping
from copy import deepcopy
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from core.async_closing import AsyncClosing
from core.eval.gateway.errors import PreflightError, UpstreamError
from core.eval.gateway.payloads import error_message
from core.eval.redact import Redactor
from core.eval.untrusted_json import load_json
from core.transport import AiohttpTransport, Exchange

logger = logging.getLogger(__name__)

#: As LiteLLM's chat calls: ten minutes for an answer, five seconds to connect.
DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=5.0)
#: As the OpenAI SDK that LiteLLM calls OpenAI-compatible servers through.
DEFAULT_MAX_RETRIES = 2
_RETRY_STATUSES = frozenset({408, 409, 429})
_MAX_RETRY_AFTER_SEC = 60.0

# Fields of a chat body that belong to the gateway, not to the model: the rollout's alias, the
# response mode, and the number of choices (only one is ever answered).
_ENVELOPE_FIELDS = ("model", "messages", "stream", "stream_options", "n")
# Names of environment variables whose values are masked in every upstream error.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD")
_MIN_AMBIENT_SECRET = 8


@dataclass(frozen=True)
class UpstreamReply:
    """A successful upstream call."""

    completion: dict[str, Any]
    """The provider's chat completion as a plain JSON object."""
    status: int = 200
    """The upstream's HTTP status."""
    cost_usd: float | None = None
    """The call's price, when the upstream knows the model's."""


class ChatUpstream(Protocol):
    """What the gateway needs from an upstream."""

    @property
    def model_path(self) -> str:
        """The run's model (`provider/model`); echoed when a request names no model."""
        ...

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values the gateway must mask wherever it writes text (keys, credentialed URLs)."""
        ...

    async def complete(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> UpstreamReply:
        """One non-streaming chat call for `body`; `headers` are passed on to the provider."""
        ...

    async def aclose(self) -> None: ...


def model_name(model_path: str) -> str:
    """`model_path` without its provider prefix: `openai/gpt-5-mini` → `gpt-5-mini`."""
    _, slash, name = model_path.partition("/")
    return name if slash and name else model_path


def _merged(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        previous = base.get(key)
        base[key] = (
            _merged(previous, value)
            if isinstance(previous, dict) and isinstance(value, dict)
            else deepcopy(value)
        )
    return base


def inference_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body's model parameters (a detached copy): everything but the envelope fields,
    with `extra_body` merged over the top level as the OpenAI SDK would send it.

    Raises `UpstreamError` (400) for an `extra_body` that is not an object or that nests
    another, and for `n` other than 1.
    """
    extra = body.get("extra_body")
    if extra is not None and not isinstance(extra, dict):
        raise UpstreamError.bad_request("extra_body must be a JSON object")
    fields = _merged(deepcopy({k: v for k, v in body.items() if k != "extra_body"}), extra or {})
    if fields.get("n") not in (None, 1):
        raise UpstreamError.bad_request("the eval's model gateway supports only n=1")
    if "extra_body" in fields:
        raise UpstreamError.bad_request("extra_body cannot contain another extra_body")
    for key in _ENVELOPE_FIELDS:
        fields.pop(key, None)
    return fields


def ambient_secret_values() -> list[str]:
    """Environment values that look like credentials (`*KEY*`, `*TOKEN*`, ... names)."""
    return [
        value
        for name, value in os.environ.items()
        if _SECRET_NAME.search(name.upper()) and len(value) >= _MIN_AMBIENT_SECRET
    ]


def masker(secrets: Iterable[str | None]) -> Redactor:
    """A redactor for upstream error text: `secrets` and the ambient credentials.

    Built when an error happens, so that keys put into the environment after the upstream
    was made (provider keys from `--secrets-file`) are masked too.
    """
    return Redactor([*secrets, *ambient_secret_values()])


def _retry_delay(attempt: int, response: Exchange | None) -> float:
    """How long to wait before retry `attempt` (0-based): what the server asked, else a
    jittered doubling from 0.5 s, at most 8 s."""
    if response is not None:
        asked = _retry_after(response.headers)
        if asked is not None and 0 < asked <= _MAX_RETRY_AFTER_SEC:
            return asked
    return min(0.5 * 2.0**attempt, 8.0) * (1 - 0.25 * random.random())


def _retry_after(headers: Mapping[str, str]) -> float | None:
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return float(milliseconds) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return moment.timestamp() - time.time()


def _should_retry(response: Exchange) -> bool:
    # A server may say so explicitly, as the OpenAI SDK honours.
    explicit = response.headers.get("x-should-retry")
    if explicit in ("true", "false"):
        return bool(explicit == "true")
    return response.status in _RETRY_STATUSES or response.status >= 500


class OpenAICompatibleUpstream(AsyncClosing):
    """An OpenAI-compatible chat endpoint: `POST <base_url>/chat/completions`.

    Its connections are its own (aiohttp, through `core.transport`, without httpx's request
    and response objects around each call: the gateway's hot path), closed by `aclose()`.
    Use as an async context manager.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model_path: str,
        model: str | None = None,
        api_key: str | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be at least 0")
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model_path = model_path
        # What its requests name: `model` as given, else `model_path` without its provider.
        self._model = model or model_name(model_path)
        self._api_key = api_key or None
        # One connection per call in flight: rollouts, not this pool, bound concurrency.
        # (httpx's own pool rescans every connection on each request: with 64 calls in flight
        # that cost the gateway several ms of CPU per call, bench/README.md.)
        self._transport = AiohttpTransport(
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=100)
        )
        self._timeout = timeout.as_dict()
        self._headers = {
            "Accept": "application/json",
            # The transport inflates what comes back, with a bound (`core.transport.inflate`).
            "Accept-Encoding": "gzip, deflate",
            "Content-Type": "application/json",
            "User-Agent": "osmosis-tui",
        }
        if self._api_key is not None:
            self._headers["Authorization"] = f"Bearer {self._api_key}"
        self._max_retries = max_retries

    @property
    def model_path(self) -> str:
        return self._model_path

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self._api_key,) if self._api_key else ()

    def _mask(self, text: str) -> str:
        return error_message(masker(self.secrets).redact(text))

    async def complete(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> UpstreamReply:
        payload = {
            **inference_fields(body),
            "model": self._model,
            # Encoded at once, so the rollout's messages need no copy of their own.
            "messages": body.get("messages", []),
        }
        # As httpx's `json=` sends it.
        encoded = json.dumps(
            payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode()
        sent = {**self._headers, **headers} if headers else self._headers
        attempt = 0
        while True:
            response: Exchange | None = None
            try:
                response = await self._transport.exchange(
                    "POST", self._url, headers=sent, body=encoded, timeout=self._timeout
                )
                if 200 <= response.status < 300:
                    return self._reply(response)
                failure = UpstreamError(
                    self._mask(
                        response.content.decode("utf-8", "replace")
                        or f"the model answered HTTP {response.status}"
                    ),
                    status=response.status,
                )
            except httpx.TimeoutException as exc:
                failure = UpstreamError(
                    self._mask(f"the model did not answer in time ({type(exc).__name__})"),
                    status=None,
                    answer=408,
                )
            except httpx.TransportError as exc:
                failure = UpstreamError(
                    self._mask(
                        f"cannot reach the model at {self._url}: {exc or type(exc).__name__}"
                    ),
                    status=None,
                    unreachable=isinstance(exc, httpx.ConnectError),
                )
            else:
                if not _should_retry(response):
                    raise failure
            if attempt >= self._max_retries:
                raise failure
            delay = _retry_delay(attempt, response)
            logger.debug("model call failed (%s); retry %d in %.2f s", failure, attempt + 1, delay)
            await asyncio.sleep(delay)
            attempt += 1

    def _reply(self, response: Exchange) -> UpstreamReply:
        try:
            completion = load_json(response.content)
        except ValueError:  # not JSON, or nested too deeply to parse
            completion = None
        if not isinstance(completion, dict):
            raise UpstreamError(
                "the model answered with a body that is not a JSON object",
                status=response.status,
                answer=502,
            )
        return UpstreamReply(completion=completion, status=response.status)

    async def aclose(self) -> None:
        await self._transport.aclose()


# The preflight's request: as small as a real call gets, with room for reasoning models.
PREFLIGHT_BODY: Mapping[str, Any] = {
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 256,
}
# Answers that mean the model cannot be used as configured: a malformed request or model
# name, a refused key, no such model, a parameter the provider rejects.
_FATAL_ANSWERS = frozenset({400, 401, 403, 404, 422})


async def preflight(upstream: ChatUpstream) -> str | None:
    """One tiny call before the run. Returns None, or a warning when the call failed in a way
    that may pass (a rate limit, a timeout, a provider error).

    Raises `PreflightError` when it cannot pass: a bad model, a refused key, an unreachable
    upstream. Its message carries the upstream's, masked.
    """
    try:
        await upstream.complete(PREFLIGHT_BODY)
    except UpstreamError as exc:
        where = f"model preflight for {upstream.model_path!r}"
        if exc.unreachable:
            raise PreflightError(f"{where} failed: {exc.message}") from None
        if exc.answer in _FATAL_ANSWERS:
            raise PreflightError(f"{where} failed (HTTP {exc.answer}): {exc.message}") from None
        kind = "rate limited" if exc.answer == 429 else f"HTTP {exc.answer}"
        warning = f"{where}: {kind}: {exc.message} (the run goes on)"
        logger.warning("%s", warning)
        return warning
    return None


__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "PREFLIGHT_BODY",
    "ChatUpstream",
    "OpenAICompatibleUpstream",
    "UpstreamReply",
    "ambient_secret_values",
    "inference_fields",
    "masker",
    "model_name",
    "preflight",
]
