"""The LLM key and the server bearer reach the servers, and nothing the run writes or prints."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

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
from server_stub.serving import serve_in_loop
from tests.eval_run.command import child_env, run_eval
from tests.eval_run.files import multiply_rows, run_folder, write_jsonl
from tests.eval_run.servers import threaded_server

LLM_KEY = f"llm-{secrets.token_hex(16)}"
SERVER_KEY = f"srv-{secrets.token_hex(16)}"


class IndiscreetWorkflow(MultiplyWorkflow):
    """The demo workflow, except that a row with `metadata.leak` fails quoting the LLM key."""

    async def run(self, ctx: AgentWorkflowContext[AgentWorkflowConfig]) -> AgentWorkflowOutput:
        rollout = get_rollout_context()
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


def test_keys_never_reach_output_files_or_terminal(tmp_path: Path) -> None:
    rows = [
        *multiply_rows(3),
        *multiply_rows(1, metadata={"stub": "error"}),
        *multiply_rows(1, metadata={"leak": True}),
    ]
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
    summary = json.loads(result.stdout)
    # The keys worked: the chat endpoint and the rollout server both require theirs.
    assert (summary["items"]["ok"], summary["items"]["failed"]) == (3, 2)
    assert summary["pass_rate"] == 3 / 5
    assert refused.returncode == 1
    assert "HTTP 401; check --server-api-key" in refused.stdout

    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert run_folder(tmp_path, "keys") / "logs.txt" in written
    texts = {str(path): path.read_bytes().decode("utf-8", "replace") for path in written}
    texts |= {"stdout": result.stdout, "stderr": result.stderr}
    texts |= {"refused stdout": refused.stdout, "refused stderr": refused.stderr}
    for where, text in texts.items():
        for key in (LLM_KEY, SERVER_KEY):
            assert key not in text, f"a key in {where}"
