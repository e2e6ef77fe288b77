"""`MessageSource`: the sample source of a workflow that keeps its conversation in a list.

A hand-written workflow registers one so that the server can show its conversation while it
runs (live previews, PROTOCOL.md §8.2):

    conversation = list(ctx.prompt)
    get_rollout_context().set_sample_source(MessageSource(conversation))
    ...  # append each message as it happens
    return AgentWorkflowOutput(messages=conversation)
"""

from __future__ import annotations

import copy

from core.types import MessageDict, RolloutSample
from server_stub.workflow import SampleSource


class MessageSource(SampleSource):
    """Reads the live list it was given; never changes it."""

    def __init__(self, messages: list[MessageDict]) -> None:
        self.messages = messages

    async def get_sample(self) -> RolloutSample:
        return RolloutSample(messages=copy.deepcopy(self.messages))

    async def get_preview(self, max_messages: int) -> RolloutSample | None:
        if max_messages <= 0:
            return None
        return RolloutSample(
            messages=copy.deepcopy(self.messages[-max_messages:]),
            extra_fields={
                # The whole history is here, so the preview may number its steps from the start.
                "_preview_truncated": len(self.messages) > max_messages,
                "_preview_turn": sum(m.get("role") == "assistant" for m in self.messages),
            },
        )
