"""The reasoning a provider attached to tool calls, given back when the rollout continues.

Providers that think before calling tools (Anthropic's thinking blocks, reasoning details)
want that reasoning again on the assistant turn that made the calls, and agent frameworks
drop it from the history they send back. As official, the gateway keeps, per rollout, the
reasoning fields of every answer that called tools, keyed by tool-call id, and fills them into
a later request's assistant message that carries one of those calls (only fields the message
leaves empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_EMPTY: tuple[Any, ...] = (None, [], "")


class ReasoningMemory:
    """Per rollout: tool-call id → the reasoning fields of the answer that made the call."""

    def __init__(self) -> None:
        self._by_rollout: dict[str, dict[str, dict[str, Any]]] = {}

    def remember(
        self, rollout_id: str, message: Mapping[str, Any], fields: Mapping[str, Any]
    ) -> None:
        """Keep `fields` (the reasoning of answer `message`) for each of its tool calls."""
        calls = message.get("tool_calls")
        if not fields or not isinstance(calls, list) or not calls:
            return
        kept = self._by_rollout.setdefault(rollout_id, {})
        for call in calls:
            call_id = call.get("id") if isinstance(call, Mapping) else None
            if isinstance(call_id, str) and call_id:
                kept[call_id] = dict(fields)

    def replayed(self, rollout_id: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """`body` with the kept reasoning filled into its assistant messages (or as it is)."""
        kept = self._by_rollout.get(rollout_id)
        messages = body.get("messages")
        if not kept or not isinstance(messages, list):
            return body
        return {**body, "messages": [self._filled(message, kept) for message in messages]}

    @staticmethod
    def _filled(message: Any, kept: Mapping[str, Mapping[str, Any]]) -> Any:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            return message
        for call in message.get("tool_calls") or ():
            call_id = call.get("id") if isinstance(call, Mapping) else None
            fields = kept.get(call_id) if isinstance(call_id, str) else None
            if fields:
                missing = {k: v for k, v in fields.items() if message.get(k) in _EMPTY}
                return {**message, **missing}
        return message

    def forget(self, rollout_id: str) -> None:
        self._by_rollout.pop(rollout_id, None)


__all__ = ["ReasoningMemory"]
