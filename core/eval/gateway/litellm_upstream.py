"""`model_path` through LiteLLM: the gateway's upstream for a workspace run (as official).

LiteLLM is the optional extra `osmosis-tui[litellm]`; it is imported only when a
`LiteLLMUpstream` is made, and `litellm_available()` tells without importing it (the import
takes seconds). Provider keys come from the environment, as LiteLLM reads them (the eval puts
the `[secrets]` there), or from `api_key`.

The request is shaped as official: the rollout's model parameters (`inference_fields`) go to
an OpenAI-wire provider as `extra_body` and to a native one as LiteLLM arguments; a field that
would change LiteLLM's own configuration (its keys, base URL, callbacks, retries, ...) is
refused with a 400 instead of obeyed; `drop_params` stays off, so a parameter the provider
does not take is an error, not silently lost. A failure keeps the provider's own status and
body where LiteLLM's exception chain still has them.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
from collections.abc import Iterator, Mapping
from contextlib import suppress
from copy import deepcopy
from functools import cached_property
from typing import Any

import httpx

from core.async_closing import AsyncClosing
from core.eval.gateway.errors import LiteLLMUnavailable, UpstreamError, answer_status
from core.eval.gateway.payloads import error_message
from core.eval.gateway.upstreams import UpstreamReply, inference_fields, masker
from core.eval.untrusted_json import int_of

EXTRA = "osmosis-tui[litellm]"
# Request fields LiteLLM would read as its own configuration rather than pass to the model,
# besides the ones LiteLLM lists itself (`_control_fields`).
_CONTROL_FIELDS = frozenset(
    {"base_url", "extra_headers", "default_headers", "deployment_id", "callbacks", "url"}
)
_CONTROL_PREFIXES = ("_", "litellm_", "aws_", "azure_", "vertex_", "watsonx_", "s3_")
_CONNECTION_ERRORS = ("APIConnectionError", "ClientConnectorError")


def litellm_available() -> bool:
    """Whether the `litellm` extra is installed (without importing it)."""
    return importlib.util.find_spec("litellm") is not None


def unavailable_message(model_path: str) -> str:
    """What to do when `model_path` needs LiteLLM and it is not installed: both ways out."""
    return (
        f"the model {model_path!r} is called through LiteLLM, which is not installed: "
        f"install it with `pip install '{EXTRA}'`, or give an OpenAI-compatible server "
        "with --chat-url URL (its key from the environment variable ROLLOUT_LLM_API_KEY)"
    )


def load_litellm(model_path: str) -> Any:
    """The `litellm` module, or `LiteLLMUnavailable` naming both ways out."""
    # LiteLLM fetches its price list from the network on import unless told to use the copy
    # it ships; a run must not depend on (or wait for) that download.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        litellm: Any = importlib.import_module("litellm")
    except ModuleNotFoundError as exc:
        raise LiteLLMUnavailable(unavailable_message(model_path)) from exc
    litellm.suppress_debug_info = True
    return litellm


def _litellm_module(name: str) -> Any:
    # By name, so that type checking does not need the optional extra installed.
    return importlib.import_module(f"litellm.{name}")


def _plain(value: Any) -> Any:
    """LiteLLM's response objects as plain JSON data, without the fields that are unset."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _plain(dump(exclude_none=True))
    if hasattr(value, "__dict__"):
        return {k: _plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return value


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


class LiteLLMUpstream(AsyncClosing):
    """`model_path` (`provider/model`) through `litellm.acompletion`, never streaming."""

    def __init__(
        self, model_path: str, *, api_base: str | None = None, api_key: str | None = None
    ) -> None:
        self._litellm = load_litellm(model_path)
        self._model_path = model_path
        self._api_base = api_base or None
        self._api_key = api_key or None

    @property
    def model_path(self) -> str:
        return self._model_path

    @property
    def secrets(self) -> tuple[str, ...]:
        # The base URL too: a self-hosted endpoint's URL may carry a credential.
        return tuple(value for value in (self._api_key, self._api_base) if value)

    @cached_property
    def _control_fields(self) -> frozenset[str]:
        listed = {
            *_litellm_module("types.utils").all_litellm_params,
            *_litellm_module("types.router").GenericLiteLLMParams.model_fields,
            *self._litellm.common_cloud_provider_auth_params["params"],
        }
        # `metadata` is a model parameter for OpenAI and Anthropic, not only LiteLLM's.
        return (frozenset(listed) | _CONTROL_FIELDS) - {"metadata"}

    def _provider(self) -> tuple[str, str]:
        try:
            model, provider, _, _ = self._litellm.get_llm_provider(
                model=self._model_path, api_base=self._api_base
            )
        except Exception as exc:
            raise UpstreamError.bad_request(
                self._mask(
                    "the model must be given as provider/model (openai/gpt-5-mini, "
                    f"anthropic/claude-sonnet-4-6, ...), not {self._model_path!r}: {exc}"
                )
            ) from None
        return str(model), str(provider)

    def _official_openai(self) -> bool:
        base = self._litellm.OpenAIGPTConfig.get_api_base(self._api_base)
        return str(base or "").rstrip("/") == "https://api.openai.com/v1"

    def _kwargs(self, body: Mapping[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
        fields = inference_fields(body)
        blocked = sorted(
            key
            for key in fields
            if key in self._control_fields or key.startswith(_CONTROL_PREFIXES)
        )
        if blocked:
            raise UpstreamError.bad_request(
                "request fields cannot change the model gateway's configuration: "
                + ", ".join(blocked)
            )
        model, provider = self._provider()
        native_claude = provider in {"azure_ai", "vertex_ai"} and "claude" in model
        openai_wire = not native_claude and (
            provider == "openrouter"
            or provider in _litellm_module("constants").openai_compatible_providers
            or (provider == "openai" and not self._official_openai())
        )
        kwargs: dict[str, Any] = {
            "model": self._model_path,
            "messages": deepcopy(body.get("messages", [])),
            "drop_params": False,
        }
        if openai_wire:
            if fields:
                kwargs["extra_body"] = fields
        else:
            self._native_metadata(fields, kwargs, provider, native_claude)
            kwargs.update(fields)
        if headers:
            kwargs["extra_headers"] = dict(headers)
        if self._api_key is not None:
            kwargs["api_key"] = self._api_key
        if self._api_base is not None:
            kwargs["base_url"] = self._api_base
        return kwargs

    @staticmethod
    def _native_metadata(
        fields: dict[str, Any], kwargs: dict[str, Any], provider: str, native_claude: bool
    ) -> None:
        """`metadata` where the provider takes it; a 400 where LiteLLM would drop it."""
        metadata = fields.pop("metadata", None)
        if metadata is None:
            return
        if provider in {"openai", "azure"}:
            kwargs["extra_body"] = {"metadata": metadata}
        elif provider == "anthropic" or native_claude:
            if not isinstance(metadata, dict) or set(metadata) - {"user_id"}:
                raise UpstreamError.bad_request("Anthropic takes only user_id in metadata")
            fields["metadata"] = metadata
        else:
            raise UpstreamError.bad_request(
                f"LiteLLM cannot pass metadata on to {provider}; use its own parameter"
            )

    async def complete(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> UpstreamReply:
        kwargs = self._kwargs(body, headers or {})
        try:
            response = await self._litellm.acompletion(**kwargs)
        except Exception as exc:
            # Not chained: LiteLLM's exception text is only ever shown masked, as below.
            raise self._error(exc) from None
        completion = _plain(response)
        if not isinstance(completion, dict):
            raise UpstreamError(
                "LiteLLM answered with something that is not a completion", status=None
            )
        return UpstreamReply(completion=completion, cost_usd=self._cost(response))

    def _cost(self, response: Any) -> float | None:
        try:
            cost = self._litellm.completion_cost(completion_response=response)
        except Exception:  # a model LiteLLM has no price for
            return None
        if isinstance(cost, bool) or not isinstance(cost, (int, float)):
            return None
        try:
            value = float(cost)
        except OverflowError:  # an int past the largest float
            return None
        # A price times an absurd token count may be inf (or NaN): not a cost anyone owes.
        return value if math.isfinite(value) and value >= 0 else None

    def _mask(self, text: str) -> str:
        redact_string = _litellm_module("litellm_core_utils.secret_redaction").redact_string
        return error_message(redact_string(masker(self.secrets).redact(text)))

    def _error(self, exc: Exception) -> UpstreamError:
        """The provider's status and body when the chain has them, else LiteLLM's."""
        classified = getattr(exc, "status_code", None)
        message = str(getattr(exc, "message", None) or exc)
        status: int | None = None
        unreachable = False
        for link in _chain(exc):
            if isinstance(link, httpx.HTTPStatusError):
                status = link.response.status_code
                with suppress(httpx.ResponseNotRead):
                    message = link.response.text or message
                break
            if isinstance(link, (ConnectionRefusedError, httpx.ConnectError)) or (
                type(link).__name__ in _CONNECTION_ERRORS
            ):
                unreachable = True
        answer = answer_status(status if status is not None else int_of(classified))
        return UpstreamError(
            self._mask(message), status=status, answer=answer, unreachable=unreachable
        )

    async def aclose(self) -> None:
        # LiteLLM keeps its HTTP clients for the process; they belong to this event loop.
        closer = getattr(self._litellm, "close_litellm_async_clients", None)
        if callable(closer):
            with suppress(Exception):
                await closer()


__all__ = [
    "EXTRA",
    "LiteLLMUpstream",
    "litellm_available",
    "load_litellm",
    "unavailable_message",
]
