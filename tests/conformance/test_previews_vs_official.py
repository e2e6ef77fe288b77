"""Live previews of OUR server against those of the OFFICIAL osmosis-ai 0.3.8 server
(PROTOCOL.md §8.2): one rollout of the same narrating workflow on each (ours: `Narrating` in
tests/server/plugins.py; theirs: its twin in official_server_entry.py), whose conversation is
the rollout's sample source, each server writing under its own preview root.

What must be equal: the preview's `extra.osmosis` (keys, and every value but the version and
the time, which are compared by what they must be) and the steps of plain text messages.
What differs, on purpose: the document's head (ours is trajectory.json's: its schema version
and agent, no `trajectory_id`); a text holding the rollout's key loses only the key with us
(the official server blanks the whole text); and ours asks the source once more when the
rollout ends, so our last preview also holds the last message (and counts its turn).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from core.serving.loopback import serve_in_loop
from server_stub import LocalBackend, create_rollout_server
from tests.conformance.official_servers import official_server
from tests.polling import eventually
from tests.server.plugins import ExactMatch, Narrating
from tests.server.rawhttp import Wire

pytestmark = pytest.mark.conformance

ROLLOUT_ID = "narrated-1"
SECRET_KEY = "sk-preview-conformance-0123456789"
# Long enough for the official server to publish while the rollout runs: it snapshots the
# source every 3 s and publishes a snapshot at its next 3 s tick.
RUNNING_SEC = 10
PREVIEW_WAIT_SEC = 30.0


@dataclass
class Previews:
    running: dict[str, Any]
    final: dict[str, Any]
    text: str  # every byte of every preview read, to search for the key


async def _follow(wire: Wire, root: Path) -> Previews:
    path = root / ROLLOUT_ID / "preview.json"
    texts: list[str] = []

    def with_status(status: str) -> Any:
        def current() -> dict[str, Any] | None:
            try:
                text = path.read_text()
            except FileNotFoundError:
                return None
            texts.append(text)
            document: dict[str, Any] = json.loads(text)
            return document if document["extra"]["osmosis"]["status"] == status else None

        return current

    response = await wire.admit(
        ROLLOUT_ID,
        initial_messages=[{"role": "user", "content": f"my key is {SECRET_KEY}"}],
        llm_api_key=SECRET_KEY,
        metadata={"lines": 3, "sleep": RUNNING_SEC},
        grade=False,
    )
    assert response.status_code == 202, response.text
    running = await eventually(with_status("running"), "a preview", timeout=PREVIEW_WAIT_SEC)
    _, result = await wire.until_terminal(ROLLOUT_ID)
    assert result["status"] == "success"
    final = await eventually(with_status("success"), "a final preview", timeout=PREVIEW_WAIT_SEC)
    return Previews(running, final, "".join(texts))


async def _ours(root: Path) -> Previews:
    backend = LocalBackend(workflow=Narrating, grader=ExactMatch)
    app = create_rollout_server(
        backend=backend, configure_logging=False, result_wait_timeout_sec=1.0, preview_root=root
    )
    async with serve_in_loop(app) as url, httpx.AsyncClient(base_url=url) as http:
        return await _follow(Wire(http), root)


async def _official(python: Path, workdir: Path, root: Path) -> Previews:
    options = ["--backend", "narrating", "--result-wait-timeout-sec", "1.0"]
    env = {"_OSMOSIS_ROLLOUT_PREVIEW_ROOT": str(root)}
    async with (
        official_server(python, "narrating", options, workdir, env) as server,
        httpx.AsyncClient(base_url=server.url) as http,
    ):
        return await _follow(Wire(http), root)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def previews(
    official_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, Previews]]:
    workdir = tmp_path_factory.mktemp("previews")
    ours, official = await asyncio.gather(
        _ours(workdir / "ours"), _official(official_python, workdir, workdir / "official")
    )
    yield {"ours": ours, "official": official}


def _metadata(document: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = document["extra"]["osmosis"]
    return metadata


@pytest.mark.asyncio(loop_scope="module")
async def test_the_preview_metadata_is_the_official_one(previews: dict[str, Previews]) -> None:
    for moment in ("running", "final"):
        ours = dict(_metadata(getattr(previews["ours"], moment)))
        official = dict(_metadata(getattr(previews["official"], moment)))
        assert list(ours) == list(official), moment
        for metadata in (ours, official):
            version = metadata.pop("preview_version")
            assert type(version) is int and version >= 1, moment
            assert datetime.fromisoformat(metadata.pop("updated_at")).utcoffset() is not None
        if moment == "final":
            assert ours.pop("turn") == official.pop("turn") + 1  # the answer, seen only by us
        assert ours == official, moment
    running = _metadata(previews["ours"].running)
    assert {
        key: running[key] for key in ("rollout_id", "preview", "turn", "truncated", "status")
    } == {
        "rollout_id": ROLLOUT_ID,
        "preview": True,
        "turn": 2,
        "truncated": False,
        "status": "running",
    }


def _without_first_message(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**step, "message": None} if step["step_id"] == 1 else step for step in steps]


@pytest.mark.asyncio(loop_scope="module")
async def test_the_steps_of_text_messages_are_the_official_ones(
    previews: dict[str, Previews],
) -> None:
    ours, official = previews["ours"].running, previews["official"].running
    # The prompt holds the key: masked in both, more of it kept by us.
    assert ours["steps"][0]["message"] == "my key is [REDACTED]"
    assert official["steps"][0]["message"] == "[REDACTED]"
    ours_steps, official_steps = (_without_first_message(d["steps"]) for d in (ours, official))
    assert ours_steps == official_steps
    assert [step["message"] for step in ours["steps"][1:]] == ["line 1", "line 2", "line 3"]
    # Ours, asked once more at the end, also shows the answer.
    assert ours["steps"] == previews["ours"].final["steps"][:-1]
    assert previews["ours"].final["steps"][-1]["message"] == "42"


@pytest.mark.asyncio(loop_scope="module")
async def test_the_document_head_names_the_rollout(previews: dict[str, Previews]) -> None:
    for side in ("ours", "official"):
        document = previews[side].running
        assert document["session_id"] == ROLLOUT_ID, side
        assert str(document["schema_version"]).startswith("ATIF-v"), side
        assert {"name", "version"} <= set(document["agent"]), side
    assert set(previews["ours"].running) <= set(previews["official"].running)


@pytest.mark.asyncio(loop_scope="module")
async def test_neither_preview_holds_the_rollouts_key(previews: dict[str, Previews]) -> None:
    for side, seen in previews.items():
        assert seen.text, side
        assert SECRET_KEY not in seen.text, side
