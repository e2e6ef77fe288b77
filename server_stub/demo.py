"""The demo rollout ("multiply"): a one-call workflow, an exact-match grader and their dataset.

`MultiplyWorkflow` sends the prompt to the rollout's chat endpoint and returns the conversation
with the reply appended (registered as the rollout's sample source, so a server with live
previews shows it while the rollout runs); `ExactMatchGrader` gives reward 1.0 when the reply
equals the label. Each row steers its own outcome through its `metadata`, read by the workflow:

- `"stub": "<directives>"`: forwarded as the `X-Stub-Behaviour` header, which the stub chat
  endpoint (`server_stub.llm`) obeys: `error` (HTTP 500, so the workflow raises → `agent_error`),
  `wrong` (an answer off by 1 or 2 → reward 0.0), `slow:<s>` (the answer takes s seconds).
  A real OpenAI-compatible endpoint ignores the header.
- `"timeout": <s>`: the row's own budget for the whole workflow; past it the workflow raises
  `TimeoutError` (→ `timeout`). A row-level budget, because an eval sets the agent timeout for
  all rows at once.
- `"sleep": <s>`: the workflow sleeps first (rows that stay `running` for minutes: "stuck").
- `"case"`: the row's intended outcome, for people and tests; the workflow ignores it.

`demo_rows(240, seed=7)` gives the bundled dataset, shuffled with the seed. Its mix
(`DEMO_DESIGN`, computed by `demo_design(240)`):

============  =====  ===============================================  ===================
case          rows   metadata                                         outcome
============  =====  ===============================================  ===================
correct        176   -                                                success, reward 1.0
slow             6   stub "slow:3"                                    success, reward 1.0
wrong           19   stub "wrong"                                     success, reward 0.0
chat_error      12   stub "error"                                     failure, agent_error
timeout         10   stub "slow:30", timeout 1.5                      failure, timeout
ungraded        14   `grade: false` on the row                        success, reward null
stuck            3   sleep 120                                        success, reward 1.0
============  =====  ===============================================  ===================

So 218 successes and 22 failures; 185 rows pass (reward 1.0), a pass rate of 185/240 = 77.1 %
once the stuck rows finish (182/237 = 76.8 % of the rows that are not stuck). With
`demo_chat_settings()` (latency 50–400 ms) the 237 rows that are not stuck finish in under
10 s at 16 in flight (about 7 s on a loopback test run); the stuck ones take two minutes,
long enough to be flagged stuck (after 30 s) and cancelled from the dashboard.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import anyio
import httpx

from server_stub.llm_answers import text_of
from server_stub.llm_behaviour import BEHAVIOUR_HEADER, StubChatSettings
from server_stub.llm_latency import LogNormalLatency
from server_stub.message_source import MessageSource
from server_stub.workflow import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    Grader,
    GraderContext,
    get_rollout_context,
)

#: What built-in integrations send; the gateway decides the real model (PROTOCOL.md §4.4).
DEFAULT_MODEL = "osmosis-rollout"
SYSTEM_PROMPT = "You are a careful calculator. Reply with the number only."

# --- the shared HTTP client -------------------------------------------------------------------

# One client per event loop: building an AsyncClient costs ~40 ms of CPU (TLS context and
# connection pool), far more than a stub chat call, and a client must not cross event loops.
_clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}


def chat_client() -> httpx.AsyncClient:
    """The shared client of the running event loop, created on first use."""
    loop = asyncio.get_running_loop()
    for other in [other for other in list(_clients) if other.is_closed()]:
        # Its loop is gone, so the client cannot be closed properly any more: just forget it.
        _clients.pop(other, None)
    client = _clients.get(loop)
    if client is None or client.is_closed:
        client = _clients[loop] = httpx.AsyncClient(
            # No read deadline of our own beyond a generous cap: the row's timeout or the
            # rollout's agent timeout decides how long a chat call may take.
            timeout=httpx.Timeout(600.0, connect=10.0),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )
    return client


async def aclose_chat_client() -> None:
    """Close the running loop's shared client (call it before the loop ends)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


# --- the workflow -----------------------------------------------------------------------------


class ChatCompletionError(RuntimeError):
    """The chat endpoint answered with an error or an unusable body (→ agent_error)."""


@dataclass(frozen=True)
class RowOptions:
    """The per-row knobs a demo row carries in its metadata."""

    stub: str | None = None
    sleep: float = 0.0
    timeout: float | None = None

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any] | None) -> RowOptions:
        meta = metadata or {}
        stub = meta.get("stub")
        if stub is not None and not isinstance(stub, str):
            raise ValueError("metadata 'stub' must be a string of stub directives")
        timeout = meta.get("timeout")
        return cls(
            stub=stub,
            sleep=_seconds(meta, "sleep") or 0.0,
            timeout=None if timeout is None else _seconds(meta, "timeout"),
        )


def _seconds(meta: dict[str, Any], key: str) -> float | None:
    value = meta.get(key)
    if value is None:
        return None
    # bool is an int subclass, but `"sleep": true` is certainly a mistake.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"metadata {key!r} must be a number of seconds >= 0, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"metadata {key!r} must be a number of seconds >= 0, got {value!r}")
    return float(value)


class MultiplyWorkflow(AgentWorkflow[AgentWorkflowConfig]):
    """Asks the chat endpoint once and returns the conversation with its reply.

    The model name is the workflow config's extra field `model`, else "osmosis-rollout".
    """

    async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> AgentWorkflowOutput:
        options = RowOptions.from_metadata(ctx.metadata)
        if options.timeout is None:
            return await self._run(ctx, options)
        with anyio.move_on_after(options.timeout):
            return await self._run(ctx, options)
        raise TimeoutError(f"the row's own {options.timeout}s budget ran out")

    async def _run(
        self, ctx: AgentWorkflowContext[AgentWorkflowConfig], options: RowOptions
    ) -> AgentWorkflowOutput:
        conversation = list(ctx.prompt)
        rollout = get_rollout_context()
        if rollout is not None:
            # What the server's live previews show while the rollout runs.
            rollout.set_sample_source(MessageSource(conversation))
        if options.sleep:
            await anyio.sleep(options.sleep)
        started = time.monotonic()
        completion = await self._complete(ctx.prompt, options.stub)
        reply = _reply_message(completion)
        conversation.append(reply)
        usage = completion.get("usage") or {}
        metrics = {
            key: float(usage[key])
            for key in ("prompt_tokens", "completion_tokens", "total_tokens")
            if isinstance(usage.get(key), (int, float))
        }
        metrics["chat_seconds"] = round(time.monotonic() - started, 6)
        return AgentWorkflowOutput(messages=conversation, metrics=metrics)

    async def _complete(self, prompt: list[dict[str, Any]], stub: str | None) -> dict[str, Any]:
        rollout = get_rollout_context()
        if rollout is None or not rollout.chat_completions_url:
            raise RuntimeError("no chat endpoint: run this workflow inside a rollout")
        headers: dict[str, str] = {}
        if rollout.api_key:
            headers["Authorization"] = f"Bearer {rollout.api_key}"
        if stub:
            headers[BEHAVIOUR_HEADER] = stub
        url = rollout.chat_completions_url.rstrip("/") + "/chat/completions"
        payload = {"model": self._model(), "messages": prompt}
        response = await chat_client().post(url, json=payload, headers=headers)
        if response.status_code != 200:
            raise ChatCompletionError(
                f"chat endpoint answered HTTP {response.status_code}: {_error_text(response)}"
            )
        try:
            body = response.json()
        except ValueError:
            raise ChatCompletionError(
                "chat endpoint answered with a body that is not JSON"
            ) from None
        if not isinstance(body, dict):
            raise ChatCompletionError("chat endpoint answered with a body that is not an object")
        return body

    def _model(self) -> str:
        model = getattr(self.config, "model", None)
        return model if isinstance(model, str) and model else DEFAULT_MODEL


def _reply_message(completion: dict[str, Any]) -> dict[str, Any]:
    try:
        message = completion["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ChatCompletionError("chat completion has no choices[0].message") from None
    if not isinstance(message, dict):
        raise ChatCompletionError("chat completion message is not an object")
    return {"role": "assistant", "content": text_of(message.get("content"))}


def _error_text(response: httpx.Response) -> str:
    """The OpenAI-style error message when there is one, else the start of the body."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return response.text[:200] or response.reason_phrase


# --- the grader -------------------------------------------------------------------------------


class ExactMatchGrader(Grader):
    """Reward 1.0 when the last assistant reply equals the label (numbers numerically), else 0."""

    async def grade(self, ctx: GraderContext) -> None:
        if ctx.sample is None:
            raise ValueError("GraderContext has no sample to reward")
        reply = last_assistant_text(ctx.sample.messages)
        ctx.set_reward(1.0 if answers_match(reply, ctx.label) else 0.0)


def last_assistant_text(messages: list[dict[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return text_of(message.get("content"))
    return None


def answers_match(reply: str | None, label: str | None) -> bool:
    """Equal after stripping; or both numbers of equal value ("391" == "391.0")."""
    if reply is None or label is None:
        return False
    reply, label = reply.strip(), label.strip()
    if reply == label:
        return True
    try:
        return Decimal(reply) == Decimal(label)
    except InvalidOperation:
        return False


# --- the dataset ------------------------------------------------------------------------------

SLOW_SEC = 3.0
TIMEOUT_BUDGET_SEC = 1.5
TIMEOUT_STUB_SEC = 30.0
STUCK_SLEEP_SEC = 120

# Share of each deliberate outcome; "correct" takes the rest.
_RATES = {"slow": 0.025, "wrong": 0.08, "chat_error": 0.05, "timeout": 0.04, "ungraded": 0.06}
_STUCK_MAX = 3
_STUCK_PER_ROWS = 80  # one stuck row per 80 rows, at most three

_METADATA: dict[str, dict[str, Any]] = {
    "correct": {},
    "slow": {"stub": f"slow:{SLOW_SEC:g}"},
    "wrong": {"stub": "wrong"},
    "chat_error": {"stub": "error"},
    "timeout": {"stub": f"slow:{TIMEOUT_STUB_SEC:g}", "timeout": TIMEOUT_BUDGET_SEC},
    "ungraded": {},
    "stuck": {"sleep": STUCK_SLEEP_SEC},
}

_QUESTIONS = (
    "What is {a} * {b}?",
    "What is {a} x {b}?",
    "What is {a} times {b}?",
    "Compute {a} * {b}.",
    "{a}*{b}",
)


@dataclass(frozen=True)
class DemoDesign:
    """How many rows of a demo dataset end in each outcome."""

    total: int
    correct: int
    slow: int
    wrong: int
    chat_error: int
    timeout: int
    ungraded: int
    stuck: int

    @property
    def cases(self) -> dict[str, int]:
        """Rows per `metadata["case"]`."""
        return {case: getattr(self, case) for case in _METADATA}

    @property
    def failed(self) -> int:
        return self.chat_error + self.timeout

    @property
    def succeeded(self) -> int:
        return self.total - self.failed

    @property
    def passed(self) -> int:
        """Rows with reward 1.0, counting the stuck rows (they answer correctly in the end)."""
        return self.correct + self.slow + self.stuck

    @property
    def pass_rate(self) -> float:
        """passed / total, as the eval computes it once every row has finished."""
        return self.passed / self.total if self.total else 0.0

    @property
    def pass_rate_without_stuck(self) -> float:
        """The pass rate over the rows that are not stuck (e.g. when those are cancelled)."""
        rows = self.total - self.stuck
        return (self.passed - self.stuck) / rows if rows else 0.0


def demo_design(count: int) -> DemoDesign:
    """The outcome counts of `demo_rows(count)`: each share rounded half up, the rest correct."""
    if count < 0:
        raise ValueError("count must be >= 0")
    counts = {case: int(count * rate + 0.5) for case, rate in _RATES.items()}
    stuck = min(_STUCK_MAX, count // _STUCK_PER_ROWS)
    correct = count - sum(counts.values()) - stuck
    return DemoDesign(total=count, correct=correct, stuck=stuck, **counts)


DEMO_DESIGN = demo_design(240)


def demo_rows(count: int = 240, *, seed: int = 7) -> list[dict[str, Any]]:
    """The demo dataset in EVAL.md §3 row format; the same count and seed give the same rows."""
    rng = random.Random(seed)
    cases = [case for case, rows in demo_design(count).cases.items() for _ in range(rows)]
    rng.shuffle(cases)
    return [_demo_row(case, rng) for case in cases]


def _demo_row(case: str, rng: random.Random) -> dict[str, Any]:
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    row: dict[str, Any] = {
        "system_prompt": SYSTEM_PROMPT,
        "user_prompt": rng.choice(_QUESTIONS).format(a=a, b=b),
        "ground_truth": str(a * b),
        "metadata": {"case": case, **_METADATA[case]},
    }
    if case == "ungraded":
        row["grade"] = False
    return row


def demo_dataset(count: int = 240, *, seed: int = 7) -> bytes:
    """`demo_rows(count, seed=seed)` as the bytes of a JSONL file."""
    lines = "".join(
        json.dumps(row, separators=(",", ":")) + "\n" for row in demo_rows(count, seed=seed)
    )
    return lines.encode()


def write_demo_dataset(path: str | Path, count: int = 240, *, seed: int = 7) -> Path:
    """Write `demo_dataset(count, seed=seed)` (parent folders created); returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(demo_dataset(count, seed=seed))
    return target


def demo_chat_settings(seed: int = 0) -> StubChatSettings:
    """Stub chat settings for the demo: 50–400 ms answers (median 120 ms), no random faults.

    The faults come from the rows alone, so a run matches `DEMO_DESIGN` exactly.
    """
    latency = LogNormalLatency(median=0.12, p99=0.35, floor=0.05, cap=0.4)
    return StubChatSettings(latency=latency, error_rate=0.0, wrong_answer_rate=0.0, seed=seed)
