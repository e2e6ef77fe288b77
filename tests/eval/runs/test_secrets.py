"""The LLM key reaches the model, the server bearer the server, the gateway's bearer the rollouts;
none of them anything the run writes or prints."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from core.serving.loopback import serve_in_loop
from server_stub import (
    AgentWorkflowConfig,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    LocalBackend,
    create_rollout_server,
    get_rollout_context,
)
from server_stub.demo import (
    ExactMatchGrader,
    MultiplyWorkflow,
    aclose_chat_client,
    demo_chat_settings,
)
from server_stub.llm import create_chat_app
from tests.eval.gateway.fake_upstream import FakeUpstream, quoting_the_key
from tests.eval.runs.command import child_env, run_eval
from tests.eval.runs.files import multiply_rows, read_jsonl, run_folder, summary_of, write_jsonl
from tests.eval.runs.servers import threaded_server

LLM_KEY = f"llm-{secrets.token_hex(16)}"
SERVER_KEY = f"srv-{secrets.token_hex(16)}"
#: The `llm_api_key` each rollout was given (the rollout servers run in this process).
GIVEN_KEYS: list[str] = []


class IndiscreetWorkflow(MultiplyWorkflow):
    """The demo workflow, except that a row with `metadata.leak` fails quoting its LLM key."""

    async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> AgentWorkflowOutput:
        rollout = get_rollout_context()
        if rollout is not None and rollout.api_key:
            GIVEN_KEYS.append(rollout.api_key)
        if (ctx.metadata or {}).get("leak") and rollout is not None:
            raise RuntimeError(f"the model gateway refused key {rollout.api_key}")
        return await super().run(ctx)


@asynccontextmanager
async def guarded_rollout_server() -> AsyncIterator[str]:
    backend = LocalBackend(workflow=IndiscreetWorkflow, grader=ExactMatchGrader)
    app = create_rollout_server(backend=backend, api_key=SERVER_KEY, configure_logging=False)
    try:
        async with serve_in_loop(app) as url:
            yield url
    finally:
        await aclose_chat_client()


def everything_written(cwd: Path, *runs: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Every file under `cwd` and every run's output, by where it came from."""
    texts = {
        str(path): path.read_bytes().decode("utf-8", "replace")
        for path in cwd.rglob("*")
        if path.is_file()
    }
    for number, run in enumerate(runs):
        texts |= {f"stdout {number}": run.stdout, f"stderr {number}": run.stderr}
    return texts


def test_keys_never_reach_output_files_or_terminal(tmp_path: Path) -> None:
    GIVEN_KEYS.clear()
    rows = [*multiply_rows(3), *multiply_rows(1, metadata={"leak": True})]
    dataset = write_jsonl(tmp_path / "rows.jsonl", rows)
    chat_app = create_chat_app(demo_chat_settings(), api_key=LLM_KEY)
    with (
        threaded_server(lambda: serve_in_loop(chat_app)) as chat_url,
        threaded_server(guarded_rollout_server) as server_url,
    ):
        result = run_eval(
            *("--server", server_url, "--chat-url", f"{chat_url}/v1"),
            *("--dataset-file", str(dataset), "--name", "keys", "--json"),
            cwd=tmp_path,
            env=child_env(ROLLOUT_LLM_API_KEY=LLM_KEY, OSMOSIS_ROLLOUT_SERVER_API_KEY=SERVER_KEY),
        )
        # A wrong bearer: refused, and said so, without echoing either key.
        refused = run_eval(
            *("--server", server_url, "--dataset-file", str(dataset), "--name", "refused"),
            *("--server-api-key", f"{SERVER_KEY}-wrong"),
            cwd=tmp_path,
            env=child_env(ROLLOUT_LLM_API_KEY=LLM_KEY),
        )
    assert result.returncode == 0, result.stderr
    summary = summary_of(result.stdout)
    # The keys worked: the chat endpoint (behind the gateway) and the rollout server both
    # require theirs.
    assert (summary["items"]["ok"], summary["items"]["failed"]) == (3, 1)
    assert summary["pass_rate"] == 3 / 4
    assert refused.returncode == 1
    assert "HTTP 401; check --server-api-key" in refused.stdout
    # Every rollout got the run's own bearer for the gateway, never the model's key.
    assert len(GIVEN_KEYS) == 4 and len(set(GIVEN_KEYS)) == 1
    bearer = GIVEN_KEYS[0]
    assert bearer != LLM_KEY and len(bearer) >= 32
    assert len(read_jsonl(run_folder(tmp_path, "keys") / "calls.jsonl")) == 3

    written = everything_written(tmp_path, result, refused)
    assert str(run_folder(tmp_path, "keys") / "logs.txt") in written
    for where, text in written.items():
        for key in (LLM_KEY, SERVER_KEY, bearer):
            assert key not in text, f"a key in {where}"


def test_a_model_quoting_the_key_back_leaks_it_nowhere(tmp_path: Path) -> None:
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(2))
    rate_limited, refusing = FakeUpstream(), FakeUpstream()
    rate_limited.respond = quoting_the_key(429)  # the preflight only warns
    refusing.respond = quoting_the_key(401)  # the preflight stops the run
    env = child_env(ROLLOUT_LLM_API_KEY=LLM_KEY)
    with (
        threaded_server(lambda: serve_in_loop(rate_limited.app)) as limited_url,
        threaded_server(lambda: serve_in_loop(refusing.app)) as refusing_url,
        threaded_server(guarded_rollout_server) as server_url,
    ):
        server = ("--server", server_url, "--server-api-key", SERVER_KEY)
        warned = run_eval(
            *server,
            *("--chat-url", f"{limited_url}/v1", "--dataset-file", str(dataset), "--name", "429"),
            cwd=tmp_path,
            env=env,
        )
        stopped = run_eval(
            *server,
            *("--chat-url", f"{refusing_url}/v1", "--dataset-file", str(dataset), "--name", "401"),
            cwd=tmp_path,
            env=env,
        )
    # The upstream got the key (one preflight, then a call per rollout) ...
    assert [seen.headers["authorization"] for seen in rate_limited.requests] == [
        f"Bearer {LLM_KEY}"
    ] * 3
    assert warned.returncode == 0, warned.stderr
    assert "! model preflight for 'osmosis-stub': rate limited: " in warned.stdout
    assert "Incorrect API key provided: ***" in warned.stdout
    calls = read_jsonl(run_folder(tmp_path, "429") / "calls.jsonl")
    assert [call["status"] for call in calls] == [429, 429]
    assert all("Incorrect API key provided: ***" in call["error"] for call in calls)
    # ... and a refused key stops the run before any rollout, with the model's message masked.
    assert stopped.returncode == 2
    assert (
        "osmosis-tui eval: model preflight for 'osmosis-stub' failed (HTTP 401): " in stopped.stderr
    )
    assert "Incorrect API key provided: ***" in stopped.stderr
    assert len(refusing.requests) == 1
    assert not run_folder(tmp_path, "401").exists()
    for where, text in everything_written(tmp_path, warned, stopped).items():
        assert LLM_KEY not in text, f"the key in {where}"
