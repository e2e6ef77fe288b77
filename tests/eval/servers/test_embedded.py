"""The demo's rollout server runs in a process of its own (`core.eval.servers.embedded`), with its
feeds where the eval says and its bearer where no other process reads it, its log records
relayed masked, and ends with the block that started it."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import httpx
import pytest

from core.client import RolloutClient
from core.eval.servers.embedded import RECORD_LIMIT, demo_rollout_server, stub_chat_endpoint
from core.serving.loopback import serve_in_loop
from core.types import PREVIEW_FILE, RolloutStatus
from tests.eval.gateway.fake_upstream import FakeUpstream, quoting_the_key
from tests.polling import eventually

QUESTION = [{"role": "user", "content": "What is 17 * 23?"}]


async def test_the_demo_server_serves_from_its_own_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    previews = tmp_path / "previews"
    previews.mkdir()
    caplog.set_level(logging.WARNING)
    async with (
        stub_chat_endpoint() as chat_url,
        demo_rollout_server(preview_root=str(previews)) as url,
        RolloutClient(url=url) as client,
    ):
        health = await client.health()
        good = await client.run_rollout(QUESTION, chat_url, "demo-ok", label="391")
        failed = await client.run_rollout(
            QUESTION, chat_url, "demo-error", label="391", metadata={"stub": "error"}
        )
    assert health["lifecycle"]["accepting_rollouts"] is True
    assert (good.status, good.sample and good.sample.reward) == (RolloutStatus.SUCCESS, 1.0)
    assert failed.status is RolloutStatus.FAILURE
    # The preview root given on its command line, not the environment's.
    assert (previews / "demo-ok" / PREVIEW_FILE).is_file()
    # Its log records come back under their own names, as when it ran in this process.
    assert any(
        record.name == "server_stub.local_backend" and "demo-error" in record.getMessage()
        for record in caplog.records
    )
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as http:
            await http.get(f"{url}/health")


LLM_KEY = "llm-" + "5f3c9a1e" * 4
SERVER_KEY = "srv-" + "0b7d2e64" * 4
# A rollout id with line breaks, as any client may send one: the relayed log must not take it
# for records of its own.
FORGED = "\nCRITICAL server_stub.app forged\n" + '{"level": 50, "name": "forged", "text": "x"}'


def demo_server_processes() -> list[int]:
    """The PIDs of this process's children running the demo server."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        ppid = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
        if int(ppid) == os.getpid() and b"server_stub.demo_server" in cmdline:
            found.append(int(entry.name))
    return found


def shown_by_ps(pid: int) -> bytes:
    """What `ps` may show of process `pid`: its command line and its environment."""
    return Path(f"/proc/{pid}/cmdline").read_bytes() + Path(f"/proc/{pid}/environ").read_bytes()


async def test_the_demo_servers_key_is_on_no_command_line_and_its_relayed_log_masks_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeUpstream()
    fake.respond = quoting_the_key(401)  # a model refusing the key, quoting it back
    caplog.set_level(logging.INFO)
    rollouts = 3
    async with (
        serve_in_loop(fake.app) as model,
        demo_rollout_server(api_key=SERVER_KEY) as url,
        httpx.AsyncClient(headers={"Authorization": f"Bearer {SERVER_KEY}"}) as http,
    ):
        (pid,) = demo_server_processes()
        # Neither its command line nor its environment holds the key (`ps` shows both).
        assert SERVER_KEY.encode() not in shown_by_ps(pid)
        assert (await http.get(f"{url}/health", headers={"Authorization": ""})).status_code == 401
        for number in range(rollouts):
            admitted = await http.post(
                f"{url}/rollout",
                json={
                    "rollout_id": f"r{number}{FORGED}",
                    "initial_messages": QUESTION,
                    "chat_completions_url": f"{model}/v1",
                    "llm_api_key": LLM_KEY,
                },
            )
            assert admitted.status_code == 202, admitted.text

        def failures() -> list[logging.LogRecord]:
            return [r for r in caplog.records if "Incorrect API key provided" in r.getMessage()]

        await eventually(lambda: len(failures()) >= rollouts, "every workflow's failure logged")
    assert len(fake.requests) == rollouts
    # Each failure came back as the one record it was, under the server's own logger, the
    # model's quote of the key masked in the child and the id's line breaks escaped.
    for record in failures():
        assert record.name.startswith("server_stub."), record.name
        assert "Incorrect API key provided: ***" in record.getMessage()
        assert "\\nCRITICAL server_stub.app forged\\n" in record.getMessage()
    relayed = "".join(record.getMessage() for record in caplog.records)
    assert LLM_KEY not in relayed and SERVER_KEY not in relayed
    assert not [record for record in caplog.records if "forged" in record.name]
    assert not [r for r in caplog.records if r.levelno == logging.CRITICAL], "no forged record"


async def test_a_log_record_too_long_to_relay_is_left_out_and_the_next_ones_still_come(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    nowhere = "http://127.0.0.1:9/v1"  # every workflow fails at once, logging its rollout id
    async with demo_rollout_server() as url, httpx.AsyncClient(timeout=30.0) as http:
        for rollout_id in ("x" * (RECORD_LIMIT + 1000), "after-the-long-one"):
            admitted = await http.post(
                f"{url}/rollout",
                json={
                    "rollout_id": rollout_id,
                    "initial_messages": QUESTION,
                    "chat_completions_url": nowhere,
                },
            )
            assert admitted.status_code == 202, admitted.text

        def relayed(text: str) -> list[logging.LogRecord]:
            return [r for r in caplog.records if text in r.getMessage()]

        await eventually(lambda: relayed("after-the-long-one"), "the next rollout's record")
        assert (await http.get(f"{url}/health")).status_code == 200
    assert relayed(f"a log line past {RECORD_LIMIT} bytes left out")
    assert not relayed("x" * 1000)
