"""The demo rollout behind a real rollout server, talking to the stub chat endpoint.

Both servers run under uvicorn on loopback ports; rollouts are driven with plain httpx the way
a controller does: POST /rollout, then long-poll GET /rollout/{id}/result with the lease.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from starlette.applications import Starlette

from core.serving.loopback import serve_in_loop
from core.types import POLLING_LEASE_HEADER
from server_stub import (
    AgentWorkflowConfig,
    ConcurrencyConfig,
    GraderContext,
    LocalBackend,
    RolloutSample,
    create_rollout_server,
)
from server_stub.demo import (
    DEMO_DESIGN,
    STUCK_SLEEP_SEC,
    ExactMatchGrader,
    MultiplyWorkflow,
    aclose_chat_client,
    answers_match,
    chat_client,
    demo_chat_settings,
    demo_design,
    demo_rows,
    write_demo_dataset,
)
from server_stub.llm import create_chat_app
from server_stub.llm_answers import solve_arithmetic
from server_stub.llm_behaviour import StubChatSettings
from server_stub.llm_latency import FixedLatency
from tests.polling import eventually

LLM_KEY = "sk-demo-test-key"
TERMINAL = {"success", "failure", "cancelled"}


@dataclass
class Servers:
    rollout_url: str
    chat_url: str
    chat_app: Starlette
    client: httpx.AsyncClient

    async def run(
        self, row: dict[str, Any], *, llm_api_key: str | None = LLM_KEY
    ) -> dict[str, Any]:
        """Admit one rollout for a dataset row and poll it to its terminal result."""
        rollout_id = uuid.uuid4().hex
        messages = [{"role": "user", "content": row["user_prompt"]}]
        if row.get("system_prompt"):
            messages.insert(0, {"role": "system", "content": row["system_prompt"]})
        admitted = await self.client.post(
            f"{self.rollout_url}/rollout",
            json={
                "rollout_id": rollout_id,
                "initial_messages": messages,
                # A rollout-specific base URL, as a real controller hands out.
                "chat_completions_url": f"{self.chat_url}/v1/rollouts/{rollout_id}",
                "llm_api_key": llm_api_key,
                "label": row.get("ground_truth"),
                "metadata": row.get("metadata"),
                "grade": row.get("grade", True),
            },
        )
        assert admitted.status_code == 202, admitted.text
        lease = {POLLING_LEASE_HEADER: admitted.json()["polling_lease_token"]}
        while True:
            polled = await self.client.get(
                f"{self.rollout_url}/rollout/{rollout_id}/result", headers=lease
            )
            assert polled.status_code == 200, polled.text
            result: dict[str, Any] = polled.json()
            if result["status"] in TERMINAL:
                return result


# The servers are shared by the module's HTTP tests (each start/stop of a uvicorn costs a few
# tenths of a second); every test gets zeroed stub counters.
on_module_loop = pytest.mark.asyncio(loop_scope="module")
IN_FLIGHT = 48


@asynccontextmanager
async def start_servers(chat_settings: StubChatSettings) -> AsyncIterator[Servers]:
    chat_app = create_chat_app(chat_settings, api_key=LLM_KEY)
    config = AgentWorkflowConfig(
        name="demo", concurrency=ConcurrencyConfig(max_concurrent=IN_FLIGHT)
    )
    backend = LocalBackend(
        workflow=MultiplyWorkflow, grader=ExactMatchGrader, workflow_config=config
    )
    rollout_app = create_rollout_server(backend=backend, configure_logging=False)
    async with (
        serve_in_loop(chat_app) as chat_url,
        serve_in_loop(rollout_app) as rollout_url,
        httpx.AsyncClient(timeout=30.0) as client,
    ):
        yield Servers(rollout_url, chat_url, chat_app, client)
        await aclose_chat_client()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_servers() -> AsyncIterator[Servers]:
    async with start_servers(StubChatSettings(latency=FixedLatency(0.005))) as running:
        yield running


@pytest.fixture
def servers(shared_servers: Servers) -> Servers:
    stats = shared_servers.chat_app.state.stats
    for counter in fields(stats):
        setattr(stats, counter.name, 0)
    return shared_servers


def row(question: str = "What is 17 * 23?", label: str = "391", **fields: Any) -> dict[str, Any]:
    metadata = fields.pop("metadata", {})
    return {"user_prompt": question, "ground_truth": label, "metadata": metadata, **fields}


# --- single rollouts ----------------------------------------------------------------------------


@on_module_loop
async def test_correct_answer_gets_reward_one(servers: Servers) -> None:
    result = await servers.run(row(system_prompt="Reply with the number only."))
    assert result["status"] == "success"
    sample = result["sample"]
    assert sample["reward"] == 1.0
    assert sample["label"] == "391"
    assert [m["role"] for m in sample["messages"]] == ["system", "user", "assistant"]
    assert sample["messages"][-1]["content"] == "391"
    metrics = sample["metrics"]
    assert metrics["prompt_tokens"] == 6 + 6  # system prompt 5 words + "."; question 6 tokens
    assert metrics["completion_tokens"] == 1
    assert metrics["total_tokens"] == 13
    assert metrics["chat_seconds"] > 0
    assert servers.chat_app.state.stats.completions == 1


@on_module_loop
async def test_wrong_answer_gets_reward_zero(servers: Servers) -> None:
    result = await servers.run(row(metadata={"stub": "wrong"}))
    assert result["status"] == "success"
    assert result["sample"]["reward"] == 0.0
    answer = int(result["sample"]["messages"][-1]["content"])
    assert answer != 391
    assert abs(answer - 391) <= 2


@on_module_loop
async def test_chat_failure_is_an_agent_error(servers: Servers) -> None:
    result = await servers.run(row(metadata={"stub": "error"}))
    assert result["status"] == "failure"
    assert result["err_category"] == "agent_error"
    assert "HTTP 500" in result["err_message"]
    assert result["sample"] is None
    assert servers.chat_app.state.stats.errors == 1


@on_module_loop
async def test_row_timeout_is_a_timeout_failure(servers: Servers) -> None:
    started = time.monotonic()
    result = await servers.run(row(metadata={"stub": "slow:5", "timeout": 0.3}))
    assert time.monotonic() - started < 2.0
    assert result["status"] == "failure"
    assert result["err_category"] == "timeout"
    assert "0.3s" in result["err_message"]
    # The abandoned chat call ends on the stub's side too instead of lingering for 5 s.
    stats = servers.chat_app.state.stats
    await eventually(
        lambda: stats.disconnects, "the stub to see the disconnect", timeout=1.0, interval=0.01
    )
    assert stats.disconnects == 1
    assert stats.completions == 0


@on_module_loop
async def test_row_timeout_covers_the_sleep(servers: Servers) -> None:
    result = await servers.run(row(metadata={"sleep": 5, "timeout": 0.2}))
    assert result["err_category"] == "timeout"
    assert servers.chat_app.state.stats.requests == 0


@on_module_loop
async def test_sleep_delays_the_rollout(servers: Servers) -> None:
    started = time.monotonic()
    result = await servers.run(row(metadata={"sleep": 0.3}))
    assert time.monotonic() - started >= 0.3
    assert result["sample"]["reward"] == 1.0


@on_module_loop
async def test_grade_false_skips_grading(servers: Servers) -> None:
    result = await servers.run(row(grade=False))
    assert result["status"] == "success"
    assert result["sample"]["reward"] is None
    assert result["sample"]["messages"][-1]["content"] == "391"


@on_module_loop
async def test_missing_llm_key_is_rejected_by_the_chat_endpoint(servers: Servers) -> None:
    result = await servers.run(row(), llm_api_key=None)
    assert result["status"] == "failure"
    assert result["err_category"] == "agent_error"
    assert "HTTP 401" in result["err_message"]
    assert LLM_KEY not in result["err_message"]


@on_module_loop
async def test_malformed_metadata_is_a_validation_error(servers: Servers) -> None:
    result = await servers.run(row(metadata={"sleep": "soon"}))
    assert result["status"] == "failure"
    assert result["err_category"] == "validation_error"
    assert "sleep" in result["err_message"]


@on_module_loop
async def test_rollouts_share_one_http_client(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    created: list[httpx.AsyncClient] = []
    original = httpx.AsyncClient

    def counting(*args: Any, **kwargs: Any) -> httpx.AsyncClient:
        client = original(*args, **kwargs)
        created.append(client)
        return client

    await aclose_chat_client()  # so that this test's rollouts must create one
    monkeypatch.setattr(httpx, "AsyncClient", counting)
    results = await asyncio.gather(*(servers.run(row()) for _ in range(6)))
    assert [r["sample"]["reward"] for r in results] == [1.0] * 6
    assert len(created) == 1
    assert servers.chat_app.state.stats.completions == 6


async def test_shared_client_is_per_event_loop_and_closable() -> None:
    first = chat_client()
    assert chat_client() is first
    elsewhere: list[httpx.AsyncClient] = []

    def other_loop() -> None:
        async def grab() -> None:
            elsewhere.append(chat_client())
            await aclose_chat_client()

        asyncio.run(grab())

    thread = threading.Thread(target=other_loop)
    thread.start()
    thread.join()
    assert elsewhere[0] is not first
    assert elsewhere[0].is_closed
    await aclose_chat_client()
    assert first.is_closed
    assert chat_client() is not first


# --- the grader on its own ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "label", "match"),
    [
        ("391", "391", True),
        (" 391\n", "391", True),
        ("391.0", "391", True),
        ("1e3", "1000", True),
        ("390", "391", False),
        ("Paris", "Paris", True),
        ("paris", "Paris", False),
        (None, "391", False),
        ("391", None, False),
    ],
)
def test_answers_match(reply: str | None, label: str | None, match: bool) -> None:
    assert answers_match(reply, label) is match


async def test_grader_reads_the_last_assistant_message() -> None:
    messages = [
        {"role": "user", "content": "What is 2 * 3?"},
        {"role": "assistant", "content": "5"},
        {"role": "user", "content": "Again?"},
        {"role": "assistant", "content": [{"type": "text", "text": "6"}]},
    ]
    ctx = GraderContext(label="6", sample=RolloutSample(messages=messages))
    await ExactMatchGrader().grade(ctx)
    assert ctx.sample is not None
    assert ctx.sample.reward == 1.0
    no_reply = GraderContext(label="6", sample=RolloutSample(messages=messages[:1]))
    await ExactMatchGrader().grade(no_reply)
    assert no_reply.sample is not None
    assert no_reply.sample.reward == 0.0


# --- the dataset --------------------------------------------------------------------------------


def test_demo_rows_follow_the_design() -> None:
    rows = demo_rows()
    assert len(rows) == DEMO_DESIGN.total == 240
    assert Counter(r["metadata"]["case"] for r in rows) == Counter(DEMO_DESIGN.cases)
    # The behaviour comes from the row's fields, not from the "case" tag: check those too.
    assert sum(r["metadata"].get("stub") == "wrong" for r in rows) == DEMO_DESIGN.wrong == 19
    assert sum(r["metadata"].get("stub") == "error" for r in rows) == DEMO_DESIGN.chat_error == 12
    assert sum("timeout" in r["metadata"] for r in rows) == DEMO_DESIGN.timeout == 10
    assert sum(r.get("grade") is False for r in rows) == DEMO_DESIGN.ungraded == 14
    assert (
        sum(r["metadata"].get("sleep") == STUCK_SLEEP_SEC for r in rows) == DEMO_DESIGN.stuck == 3
    )
    assert DEMO_DESIGN.correct == 176
    assert DEMO_DESIGN.slow == 6
    assert DEMO_DESIGN.failed == 22
    assert DEMO_DESIGN.passed == 185
    assert DEMO_DESIGN.pass_rate == pytest.approx(185 / 240)
    assert DEMO_DESIGN.pass_rate_without_stuck == pytest.approx(182 / 237)


def test_demo_rows_are_well_formed_and_deterministic() -> None:
    rows = demo_rows()
    for r in rows:
        assert set(r) <= {"system_prompt", "user_prompt", "ground_truth", "metadata", "grade"}
        value = solve_arithmetic(r["user_prompt"])
        assert value is not None
        assert str(value) == r["ground_truth"]
        assert isinstance(r["metadata"], dict)
        assert ("grade" in r) == (r["metadata"]["case"] == "ungraded")
    assert demo_rows() == rows
    assert demo_rows(seed=8) != rows
    assert len({r["user_prompt"] for r in rows}) > 200


@pytest.mark.parametrize("count", [0, 1, 10, 79, 80, 500, 1000])
def test_demo_design_scales_to_any_count(count: int) -> None:
    design = demo_design(count)
    assert sum(design.cases.values()) == count
    assert min(design.cases.values()) >= 0
    assert design.stuck <= 3
    assert len(demo_rows(count)) == count


def test_write_demo_dataset_writes_jsonl(tmp_path: Path) -> None:
    target = write_demo_dataset(tmp_path / "data" / "multiply.jsonl", 30, seed=3)
    lines = target.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == demo_rows(30, seed=3)


def test_demo_latency_stays_within_50_to_400_ms() -> None:
    settings = demo_chat_settings()
    assert settings.error_rate == settings.wrong_answer_rate == 0.0
    draws = [settings.latency.sample(i / 1000) for i in range(1, 1000)]
    assert min(draws) >= 0.05
    assert max(draws) <= 0.4
    assert 0.1 <= statistics.median(draws) <= 0.15


@on_module_loop
async def test_demo_dataset_runs_to_the_designed_outcomes(servers: Servers) -> None:
    """The bundled rows end to end: every deliberate outcome, plus a share of the correct rows.

    (All 176 correct rows would only repeat the same path at a few seconds of CPU; every row's
    question and label are checked without a server above.)
    """
    correct_sample = 40
    rows: list[dict[str, Any]] = []
    for r in demo_rows():
        case = r["metadata"]["case"]
        if case == "stuck" or (case == "correct" and correct_sample == 0):
            continue
        correct_sample -= case == "correct"
        rows.append(r)
    # Longest first, so the 3 s slow rows overlap with the rest instead of trailing it.
    rows.sort(key=lambda r: r["metadata"]["case"] not in ("slow", "timeout"))
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(r: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        async with gate:
            return r["metadata"]["case"], await servers.run(r)

    outcomes = await asyncio.gather(*(one(r) for r in rows))
    summary = Counter(
        (case, result["status"], result["err_category"], (result["sample"] or {}).get("reward"))
        for case, result in outcomes
    )
    assert summary == {
        ("correct", "success", None, 1.0): 40,
        ("slow", "success", None, 1.0): DEMO_DESIGN.slow,
        ("wrong", "success", None, 0.0): DEMO_DESIGN.wrong,
        ("chat_error", "failure", "agent_error", None): DEMO_DESIGN.chat_error,
        ("timeout", "failure", "timeout", None): DEMO_DESIGN.timeout,
        ("ungraded", "success", None, None): DEMO_DESIGN.ungraded,
    }
    assert servers.chat_app.state.stats.errors == DEMO_DESIGN.chat_error
