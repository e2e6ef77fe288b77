"""The text of a message as a reader wants it, whatever shape the rollout kept it in.

Rollouts built on the OpenAI Agents SDK keep the SDK's items: an assistant message's content
is a list of parts (`{"type": "output_text", "text": ...}`), sometimes JSON-encoded into a
string, sometimes a whole output item (`{"type": "message", "content": [...]}`). The details
show the text of those, never their JSON; anything else (a reply that is JSON on purpose, a
tool's arguments) is shown as it came.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.eval.gateway_payloads import message_text


def message_shown(message: Mapping[str, Any]) -> str:
    """A chat message or an Agents SDK item as the text to show (untrusted: still raw)."""
    content = message.get("content")
    parts = _parts(_decoded(content))
    text = message_text({**message, "content": content if parts is None else parts})
    if text:
        return text
    if message.get("type") == "function_call":  # an SDK item that calls a tool
        return f"{message.get('name', '?')}({message.get('arguments', '')})"
    if message.get("type") == "function_call_output":
        output = message.get("output")
        return output if isinstance(output, str) else json.dumps(output, default=str)
    return content if isinstance(content, str) else json.dumps(content, default=str)


def text_shown(text: str) -> str:
    """A text that may be message parts JSON-encoded (a model's reply): their text, else itself."""
    parts = _parts(_decoded(text))
    return text if parts is None else message_text({"content": parts}) or text


def _decoded(content: object) -> object:
    """`content`, or what it encodes when it is a string holding a JSON list or object."""
    if isinstance(content, str) and content.lstrip()[:1] in ("[", "{"):
        try:
            decoded: object = json.loads(content)
        except ValueError:
            return content
        return decoded
    return content


def _parts(value: object) -> list[Mapping[str, Any]] | None:
    """The text parts of message parts, messages or SDK output items (one, or a list of
    them), flattened; None when `value` is anything else, so that it is shown as it is."""
    items = [value] if isinstance(value, Mapping) else value
    if not isinstance(items, list) or not items:
        return None
    parts: list[Mapping[str, Any]] = []
    for item in items:
        if not isinstance(item, Mapping) or not ("type" in item or "role" in item):
            return None  # not the shape of a part or an item: a JSON reply, say
        if isinstance(item.get("text"), str):
            parts.append(item)
        elif isinstance(item.get("refusal"), str):
            parts.append({"text": item["refusal"]})
        elif isinstance(item.get("content"), str):
            parts.append({"text": item["content"]})
        elif (inner := _parts(item.get("content"))) is not None:
            parts += inner
        else:
            return None
    return parts
