"""The bodies the model gateway answers with, built from an upstream's completion (as official).

An upstream hands back a plain chat-completion object (`UpstreamReply.completion`); the
gateway never passes it on as it is but rebuilds it, so every answer has the same shape
whatever the provider:

- `chat.completion` (`stream: false`): `id`, `object`, `created`, `model` (the name the
  rollout asked for), `choices[]` with `message` = role, content, the reasoning fields the
  provider gave (`reasoning_content`, `thinking_blocks`, `reasoning_details`), `tool_calls`
  and `refusal` when present, and `finish_reason`; `usage` with the three token counts when
  the provider reported any (0 for one that is missing or not a count: `read_usage`);
- `chat.completion.chunk` (`stream: true`): the same, with the whole message as `delta` (no
  `role`; tool calls renumbered 0, 1, ... as streaming clients index them), sent once between
  `: ping` heartbeats and `data: [DONE]`;
- errors: `{"error": {"message", "type", "code"}, "detail"}`, `type` being
  `invalid_request_error` for a 400 and `bridge_error` otherwise.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.eval.safe_text import shown_value
from core.eval.token_counts import token_count
from core.eval.untrusted_json import is_finite
from core.transcript import content_text

#: The SSE comment sent before the upstream call and then every heartbeat interval.
SSE_PING = ": ping\n\n"
SSE_DONE = "data: [DONE]\n\n"
#: Error messages are cut here (after collapsing whitespace), as official.
ERROR_MESSAGE_LIMIT = 1000

_REASONING_FIELDS = ("reasoning_content", "thinking_blocks", "reasoning_details")


def compact_json(data: Any) -> str:
    """JSON without spaces, ASCII-escaped: the form of every SSE `data:` line."""
    return json.dumps(data, separators=(",", ":"))


def sse_data(payload: Mapping[str, Any]) -> str:
    return f"data: {compact_json(payload)}\n\n"


def sse_error(payload: Mapping[str, Any]) -> str:
    """An error after the stream has begun: the status line is gone, so it is an event."""
    return f"event: error\ndata: {compact_json(payload)}\n\n"


def error_message(text: str) -> str:
    """`text` on one line and at most `ERROR_MESSAGE_LIMIT` characters."""
    return " ".join(text.split())[:ERROR_MESSAGE_LIMIT]


def error_payload(status: int, message: str) -> dict[str, Any]:
    """The OpenAI-style error body for an answer with `status`."""
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error" if status == 400 else "bridge_error",
            "code": status,
        },
        "detail": message,
    }


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _timestamp(value: Any) -> int:
    """`created` in whole seconds: now, unless the upstream gave a finite positive number
    (`int(Infinity)` would raise)."""
    return int(value) if is_finite(value) and value > 0 else int(time.time())


def choices(completion: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = completion.get("choices")
    if not isinstance(found, list):
        return []
    return [_mapping(choice) for choice in found]


@dataclass(frozen=True)
class Usage:
    """The token counts of an upstream's `usage`, read through `core.eval.token_counts`."""

    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    """None for a count that was reported as something that is not one; a missing count is
    0 (a missing total: the other two summed)."""
    ignored: tuple[str, ...] = ()
    """The values that are not counts, as `usage.<name> = <value>`, for a warning."""

    def wire(self) -> dict[str, int]:
        """The answer's `usage`: an unknown count is 0, as official answers a missing one."""
        return {
            "prompt_tokens": self.prompt_tokens or 0,
            "completion_tokens": self.completion_tokens or 0,
            "total_tokens": self.total_tokens or 0,
        }


def read_usage(completion: Mapping[str, Any]) -> Usage | None:
    """The completion's token counts; None when the upstream gave no `usage`.

    `input_tokens`/`output_tokens` stand in for the first two, and a missing total is their
    sum, so that providers with Responses-style usage still count.
    """
    usage = completion.get("usage")
    if not isinstance(usage, Mapping):
        return None
    ignored: list[str] = []

    def count(*names: str) -> int | None:
        name, value = next(
            ((name, usage[name]) for name in names if usage.get(name) is not None),
            (names[0], None),
        )
        if value is None:
            return 0
        found = token_count(value)
        if found is None:
            ignored.append(f"usage.{name} = {shown_value(value)}")
        return found

    prompt = count("prompt_tokens", "input_tokens")
    produced = count("completion_tokens", "output_tokens")
    if usage.get("total_tokens") is None:
        total = None if prompt is None or produced is None else prompt + produced
    else:
        total = count("total_tokens")
    return Usage(prompt, produced, total, tuple(ignored))


def reply_message(choice: Mapping[str, Any]) -> Mapping[str, Any]:
    """The choice's message (or its delta, for an upstream that answered with a chunk)."""
    message = choice.get("message")
    if message is None:
        return _mapping(choice.get("delta"))
    return _mapping(message)


def reasoning_fields(message: Mapping[str, Any]) -> dict[str, Any]:
    """The provider's reasoning as the message carries it, top level or provider-specific."""
    provider_fields = _mapping(message.get("provider_specific_fields"))
    found: dict[str, Any] = {}
    for name in _REASONING_FIELDS:
        value = message.get(name)
        if value is None:
            value = provider_fields.get(name)
        if value is not None:
            found[name] = value
    return found


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else str(content or "")


def _renumbered(tool_calls: Any) -> list[Any]:
    # Anthropic numbers content blocks including thinking ones; streaming clients need the
    # tool calls' own positions.
    calls = tool_calls if isinstance(tool_calls, list) else [tool_calls]
    return [
        {**call, "index": index} if isinstance(call, Mapping) else call
        for index, call in enumerate(calls)
    ]


def _choice(choice: Mapping[str, Any], position: int, *, stream: bool) -> dict[str, Any]:
    message = reply_message(choice)
    tool_calls = message.get("tool_calls")
    refusal = message.get("refusal")
    body: dict[str, Any] = {} if stream else {"role": "assistant"}
    body.update({"content": _content(message), **reasoning_fields(message)})
    if tool_calls:
        body["tool_calls"] = _renumbered(tool_calls) if stream else tool_calls
    if refusal is not None:
        body["refusal"] = str(refusal)
    index = choice.get("index")
    return {
        "index": index if isinstance(index, int) and index else position,
        "delta" if stream else "message": body,
        "finish_reason": choice.get("finish_reason", "stop"),
    }


def answer_payload(
    completion: Mapping[str, Any], *, requested_model: str, stream: bool
) -> dict[str, Any]:
    """The `chat.completion` (or, with `stream`, the one `chat.completion.chunk`) to answer."""
    completion_id = completion.get("id")
    created = completion.get("created")
    payload: dict[str, Any] = {
        "id": completion_id
        if isinstance(completion_id, str) and completion_id
        else "chatcmpl-eval",
        "object": "chat.completion.chunk" if stream else "chat.completion",
        "created": _timestamp(created),
        "model": requested_model,
        "choices": [
            _choice(choice, position, stream=stream)
            for position, choice in enumerate(choices(completion))
        ],
    }
    usage = read_usage(completion)
    if usage is not None:
        payload["usage"] = usage.wire()
    return payload


def message_text(message: Mapping[str, Any]) -> str:
    """A message as text for the records: its content as the transcript reads it
    (`core.transcript.content_text`), else its tool calls' names."""
    text = content_text(message.get("content"))
    if text:
        return text
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        names = [str(_mapping(_mapping(call).get("function")).get("name") or "?") for call in calls]
        return "tool calls: " + ", ".join(names)
    return ""


def last_message_text(body: Mapping[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ""
    return message_text(_mapping(messages[-1]))


def reply_text(completion: Mapping[str, Any]) -> str:
    found = choices(completion)
    return message_text(reply_message(found[0])) if found else ""


__all__ = [
    "ERROR_MESSAGE_LIMIT",
    "SSE_DONE",
    "SSE_PING",
    "Usage",
    "answer_payload",
    "choices",
    "compact_json",
    "error_message",
    "error_payload",
    "last_message_text",
    "message_text",
    "read_usage",
    "reasoning_fields",
    "reply_message",
    "reply_text",
    "sse_data",
    "sse_error",
]
