"""The plug-in API a rollout author writes against (PROTOCOL.md §7.1, §4.4).

Names and attributes match `osmosis_ai.rollout`, so a rollout file written for the official
server runs here by changing its imports only.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from core.types import MessageDict, Messages, RolloutSample, RolloutStatus


class ConcurrencyConfig(BaseModel):
    max_concurrent: int | None = Field(default=None, ge=1)


class BaseConfig(BaseModel):
    model_config = ConfigDict(extra="allow", validate_assignment=True, arbitrary_types_allowed=True)

    name: str
    description: str | None = None


class AgentWorkflowConfig(BaseConfig):
    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)


class GraderConfig(BaseConfig):
    # Present for parity with the official API; only the workflow's concurrency is used.
    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)


class AgentWorkflowOutput(BaseModel):
    """What `AgentWorkflow.run` may return; re-validated when the backend receives it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, revalidate_instances="always")

    messages: list[MessageDict] | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)


TConfig = TypeVar("TConfig", bound=AgentWorkflowConfig)


@dataclass
class AgentWorkflowContext(Generic[TConfig]):
    prompt: list[dict[str, Any]]
    config: TConfig | None = None
    metadata: dict[str, Any] | None = None
    artifacts_dir: Path | None = None


@dataclass
class GraderContext:
    label: str | None = None
    sample: RolloutSample | None = None
    project_path: str | None = None
    metadata: dict[str, Any] | None = None
    artifacts_dir: Path | None = None

    def set_reward(self, reward: float) -> None:
        if self.sample is None:
            raise ValueError("GraderContext has no sample to reward")
        # The sample validates assignments: a non-finite or non-numeric reward raises here.
        self.sample.reward = reward


class AgentWorkflow(ABC, Generic[TConfig]):
    """One agent run. A new instance is built per rollout from a copy of the workflow config."""

    def __init__(self, config: TConfig | None = None) -> None:
        self.config = config

    @abstractmethod
    async def run(
        self, ctx: AgentWorkflowContext[TConfig]
    ) -> AgentWorkflowOutput | Messages | None:
        """Return the conversation, or None to use the sample of the registered SampleSource."""


class Grader(ABC):
    """Sets the reward on the rollout's sample; the return value of `grade` is ignored."""

    def __init__(self, config: GraderConfig | None = None) -> None:
        self.config = config

    @abstractmethod
    async def grade(self, ctx: GraderContext) -> Any:
        """Call `ctx.set_reward(...)` unless the sample is to be removed."""


class SampleSource(ABC):
    """Supplies the sample when a workflow returns None (agent-framework integrations), and the
    live previews of a running rollout. A rollout registers at most one, through
    `RolloutContext.set_sample_source`."""

    @abstractmethod
    async def get_sample(self) -> RolloutSample:
        """The rollout's sample."""

    async def get_preview(self, max_messages: int) -> RolloutSample | None:
        """A copy of at most `max_messages` of the newest messages, for a live preview.

        Optional (None: no preview). It must neither produce the grading sample nor change the
        live history; `max_messages <= 0` returns None. `extra_fields` may say whether older
        messages were left out (`_preview_truncated`) and how many model turns were taken
        (`_preview_turn`).
        """
        return None


class RolloutProgress:
    """The server-side status of one rollout, reported by the backend through its context."""

    __slots__ = ("on_status", "status")

    def __init__(
        self,
        status: RolloutStatus = RolloutStatus.QUEUED,
        on_status: Callable[[RolloutStatus], None] | None = None,
    ) -> None:
        self.status = status
        self.on_status = on_status

    async def set_status(self, status: RolloutStatus) -> None:
        if status == self.status or self.status.is_terminal:
            return
        self.status = status
        if self.on_status is not None:
            self.on_status(status)


_current: ContextVar[RolloutContext | None] = ContextVar("osmosis_rollout_context", default=None)


@dataclass
class RolloutContext:
    """Ambient per-rollout facts a workflow needs: where to send chat calls and with which key.

    Empty values are filled from the environment, as container runners expect.
    """

    chat_completions_url: str = ""
    api_key: str | None = field(default=None, repr=False)
    rollout_id: str = ""
    sample_source: SampleSource | None = None
    progress: RolloutProgress | None = None
    process_id: str | None = None
    preview_path: Path | None = None
    preview_enabled: bool = True

    def __post_init__(self) -> None:
        self.chat_completions_url = self.chat_completions_url or os.environ.get(
            "OSMOSIS_CHAT_COMPLETIONS_URL", ""
        )
        self.api_key = self.api_key or os.environ.get("OSMOSIS_API_KEY")
        self.rollout_id = self.rollout_id or os.environ.get("OSMOSIS_ROLLOUT_ID", "")

    def __enter__(self) -> RolloutContext:
        _current.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _current.set(None)

    def set_sample_source(self, source: SampleSource) -> None:
        if self.sample_source is not None:
            raise ValueError(
                "this rollout already has a sample source; a rollout yields one sample, "
                "so build one agent or session per rollout"
            )
        self.sample_source = source

    async def get_sample(self) -> RolloutSample | None:
        return None if self.sample_source is None else await self.sample_source.get_sample()

    async def set_status(self, status: RolloutStatus) -> None:
        if self.progress is not None:
            await self.progress.set_status(status)


def get_rollout_context() -> RolloutContext | None:
    """The context of the rollout running in this task, or None (e.g. inside a grader)."""
    return _current.get()
