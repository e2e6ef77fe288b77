"""Which model the run's gateway calls (EVAL.md §4): chosen with the inputs, opened with the run.

- the stub model: the demo, a `--server` run without a config, and `--chat-url stub`;
- `--chat-url URL`: any OpenAI-compatible server, its key from `ROLLOUT_LLM_API_KEY`, `model`
  the `--chat-model` name as given, else the config's `model_path` (without its provider
  prefix), else the stub's name;
- the config's `model_path` through LiteLLM, when neither is given and the
  `osmosis-tui[litellm]` extra is installed.

`choose_upstream` decides while the inputs are checked, so that a workspace run with no way
to its model is an input problem (exit 2) found with the others; `opened_upstream` makes the
choice live on the run's event loop, with the request headers the gateway passes on to it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from core.eval.gateway.litellm_upstream import (
    LiteLLMUpstream,
    litellm_available,
    unavailable_message,
)
from core.eval.gateway.upstreams import ChatUpstream, OpenAICompatibleUpstream, model_name

#: `--chat-url stub`: the stub model, started in-process as in the demo.
STUB = "stub"
#: The model name the stub answers as, and the run's `model_path` without a config.
STUB_MODEL = "osmosis-stub"

UpstreamKind = Literal["stub", "url", "litellm"]


@dataclass(frozen=True)
class UpstreamChoice:
    """The run's upstream, as plain data (no connection is made until it is opened)."""

    kind: UpstreamKind
    model_path: str
    base_url: str | None = None
    """The `--chat-url` of a `url` upstream."""
    chat_model: str | None = None
    """`--chat-model`: the name a `url` upstream is asked for, sent as given (a server's own
    names may hold a slash, `meta-llama/Llama-3.1-8B`, which is no provider prefix)."""

    @property
    def sent_model(self) -> str:
        """The `model` the upstream's requests name."""
        if self.kind == "url":
            return self.chat_model or model_name(self.model_path)
        return self.model_path

    def label(self) -> str:
        """The model as a person knows it: its name, and where it is asked when that is a
        URL of the user's (the config's model_path is not what such a server is asked for)."""
        if self.kind == "url":
            return f"{self.sent_model} at {self.base_url}"
        return self.model_path

    def destination(self) -> str:
        """Where the rollouts' model calls go, for a question asked before they do."""
        return "the stub model" if self.kind == "stub" else f"model {self.label()}"

    def describe(self) -> str:
        """For the log: which model, and how it is reached (never a key)."""
        if self.kind == "stub":
            return "the stub model (in-process)"
        if self.kind == "url":
            return f"{self.sent_model!r} at {self.base_url}"
        return f"{self.model_path!r} through LiteLLM"


def choose_upstream(
    chat_url: str | None, model_path: str | None, chat_model: str | None = None
) -> UpstreamChoice:
    """The upstream for `--chat-url` (None when not given), the config's `model_path` (None
    without a config) and `--chat-model` (None when not given; only with a URL, which the
    flags' own check sees to). `ValueError` says what is wrong, naming the flag."""
    if chat_url is not None:
        if chat_url == STUB:
            return UpstreamChoice("stub", STUB_MODEL)
        parts = urlsplit(chat_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected an http:// or https:// URL (or {STUB!r}), got {chat_url!r}")
        return UpstreamChoice("url", model_path or chat_model or STUB_MODEL, chat_url, chat_model)
    if model_path is None:
        return UpstreamChoice("stub", STUB_MODEL)
    if not litellm_available():
        raise ValueError(unavailable_message(model_path))
    return UpstreamChoice("litellm", model_path)


@asynccontextmanager
async def opened_upstream(
    choice: UpstreamChoice, *, api_key: str | None
) -> AsyncIterator[tuple[ChatUpstream, tuple[str, ...]]]:
    """The upstream, live until the block ends, and the request headers to forward to it.

    `api_key` is the `url` upstream's key. The stub is served in-process for the block and
    gets the demo rows' behaviour header; it is called without retries, so that a row asking
    for an error gets exactly one.
    """
    async with AsyncExitStack() as stack:
        forwarded: tuple[str, ...] = ()
        upstream: ChatUpstream
        if choice.kind == "stub":
            # Only here: the demo's stack (server_stub) is not loaded for the other upstreams.
            from core.eval.servers.embedded import BEHAVIOUR_HEADER, stub_chat_endpoint

            url = await stack.enter_async_context(stub_chat_endpoint())
            upstream = await stack.enter_async_context(
                OpenAICompatibleUpstream(url, model_path=STUB_MODEL, max_retries=0)
            )
            forwarded = (BEHAVIOUR_HEADER,)
        elif choice.kind == "url":
            assert choice.base_url is not None
            upstream = await stack.enter_async_context(
                OpenAICompatibleUpstream(
                    choice.base_url,
                    model_path=choice.model_path,
                    model=choice.sent_model,
                    api_key=api_key,
                )
            )
        else:
            upstream = await stack.enter_async_context(LiteLLMUpstream(choice.model_path))
        yield upstream, forwarded


__all__ = [
    "STUB",
    "STUB_MODEL",
    "UpstreamChoice",
    "choose_upstream",
    "opened_upstream",
]
