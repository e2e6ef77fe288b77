"""Live previews (PROTOCOL.md §8.2): `<root>/<rollout_id>/preview.json` while a rollout runs,
written by a real server on a loopback port."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.types import MAX_PREVIEW_BYTES, MAX_PREVIEW_STEPS, MAX_PREVIEW_TEXT_CHARS
from server_stub import LocalBackend, create_rollout_server
from server_stub.demo import ExactMatchGrader, MultiplyWorkflow, aclose_chat_client
from tests.conftest import Serve
from tests.polling import eventually
from tests.server.chat import KEY
from tests.server.plugins import ExactMatch, Narrating
from tests.server.rawhttp import Wire

SECRET_KEY = "sk-preview-test-secret-0123456789"
Start = Callable[..., Any]


@pytest.fixture(autouse=True)
def quick_previews(monkeypatch: pytest.MonkeyPatch) -> None:
    """A publisher tick of 0.1 s instead of 3 s, and no feed switched on by the environment."""
    monkeypatch.setattr("server_stub.previews.PREVIEW_INTERVAL_SEC", 0.1)
    monkeypatch.delenv("_OSMOSIS_ROLLOUT_PREVIEW_ROOT", raising=False)
    monkeypatch.delenv("OSMOSIS_ROLLOUT_OTLP_ENDPOINT", raising=False)


@pytest.fixture
def wire(serve: Serve) -> Callable[..., Any]:
    """`async with wire(preview_root=...) as w:` a Wire against a fresh server of `Narrating`."""

    @asynccontextmanager
    async def start(**options: Any) -> AsyncIterator[Wire]:
        backend = LocalBackend(workflow=Narrating, grader=ExactMatch)
        app = create_rollout_server(
            backend=backend, configure_logging=False, result_wait_timeout_sec=1.0, **options
        )
        async with serve(app) as url, httpx.AsyncClient(base_url=url) as http:
            yield Wire(http)

    return start


def _read(path: Path) -> dict[str, Any] | None:
    try:
        document: dict[str, Any] = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    return document


def _osmosis(document: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = document["extra"]["osmosis"]
    return metadata


async def _preview_with(path: Path, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    def current() -> dict[str, Any] | None:
        document = _read(path)
        return document if document is not None and check(document) else None

    found = await eventually(current, f"a preview at {path} that passes {check.__name__}")
    assert found is not None
    return found


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


async def test_a_running_rollout_has_a_preview_that_follows_it(wire: Start, tmp_path: Path) -> None:
    path = tmp_path / "previews" / "live-1" / "preview.json"
    async with wire(preview_root=tmp_path / "previews") as w:
        await w.admit("live-1", metadata={"sleep": 60}, llm_api_key=SECRET_KEY)

        def running(document: dict[str, Any]) -> bool:
            return bool(_osmosis(document)["status"] == "running")

        document = await _preview_with(path, running)
        assert {k: v for k, v in document.items() if k != "extra"} == {
            "schema_version": "ATIF-v1.2",
            "session_id": "live-1",
            "agent": {"name": "osmosis-tui server_stub", "version": "0.1.0"},
            "steps": [
                {
                    "step_id": 1,
                    "source": "user",
                    "message": "What is 6 * 7?",
                    "extra": {"osmosis": {"original_step_id": 1}},
                },
                {
                    "step_id": 2,
                    "source": "agent",
                    "message": "line 1",
                    "extra": {"osmosis": {"original_step_id": 2}},
                },
            ],
        }
        metadata = _osmosis(document)
        first_version = metadata.pop("preview_version")
        assert isinstance(first_version, int) and first_version >= 1
        assert datetime.fromisoformat(metadata.pop("updated_at")).tzinfo is not None
        assert metadata == {
            "rollout_id": "live-1",
            "preview": True,
            "turn": 1,
            "truncated": False,
            "status": "running",
        }
        await w.cancel(ids=["live-1"])
        await w.until_terminal("live-1")

        def cancelled(document: dict[str, Any]) -> bool:
            return bool(_osmosis(document)["status"] == "cancelled")

        final = await _preview_with(path, cancelled)
    assert _osmosis(final)["preview_version"] == first_version + 1
    # Nothing else is left in the rollout's folder: no temporary files.
    assert _names(path.parent) == ["preview.json"]


async def test_each_rewrite_replaces_the_whole_file(wire: Start, tmp_path: Path) -> None:
    path = tmp_path / "live-2" / "preview.json"
    versions: list[int] = []
    inodes: set[int] = set()
    async with wire(preview_root=tmp_path) as w:
        await w.admit("live-2", metadata={"lines": 0, "ticks": 30, "tick": 0.05})
        done = False
        while not done:
            # A reader never sees half a file: every read is a whole document.
            document = _read(path)
            if document is not None:
                versions.append(_osmosis(document)["preview_version"])
                inodes.add(os.stat(path).st_ino)
                done = _osmosis(document)["status"] == "success"
            await asyncio.sleep(0.01)
        await w.until_terminal("live-2")
    assert versions == sorted(versions)
    assert len(set(versions)) >= 3
    # os.replace puts a new file in place each time, rather than rewriting the old one.
    assert len(inodes) >= 3
    assert _names(path.parent) == ["preview.json"]
    final = _read(path)
    assert final is not None
    assert final["steps"][-1]["message"] == "42"
    assert _osmosis(final)["turn"] == 16  # 15 of the 30 lines, then the answer


async def test_a_preview_keeps_the_newest_steps_within_the_limits(
    wire: Start, tmp_path: Path
) -> None:
    path = tmp_path / "big" / "preview.json"
    async with wire(preview_root=tmp_path) as w:
        # 250 lines of 20,000 characters: far beyond 100 steps, 16 KiB a string and 900 KiB.
        await w.admit("big", metadata={"lines": 250, "text": "x" * 20_000, "sleep": 60})

        def some(document: dict[str, Any]) -> bool:
            return bool(document["steps"])

        await _preview_with(path, some)
        size = path.stat().st_size
        document = _read(path)
        await w.cancel(ids=["big"])
        await w.until_terminal("big")
    assert document is not None
    assert size <= MAX_PREVIEW_BYTES
    steps = document["steps"]
    assert 1 <= len(steps) < MAX_PREVIEW_STEPS
    assert [step["step_id"] for step in steps] == list(range(1, len(steps) + 1))
    for step in steps:
        assert step["message"] == "x" * MAX_PREVIEW_TEXT_CHARS + " [preview truncated]"
        # The source left older messages out: their positions in the rollout are unknown.
        assert step["extra"]["osmosis"]["original_step_id"] is None
    metadata = _osmosis(document)
    assert metadata["truncated"] is True
    assert metadata["turn"] == 125


async def test_secrets_never_reach_a_preview(wire: Start, tmp_path: Path) -> None:
    path = tmp_path / "secret" / "preview.json"
    prompt = (
        f"key {SECRET_KEY}; Authorization: Bearer abcdefghijklmnop; "
        "https://user:hunter22@example.com/x; password=hunter33"
    )
    async with wire(preview_root=tmp_path) as w:
        await w.admit(
            "secret",
            initial_messages=[
                {"role": "user", "content": prompt},
                {"role": "user", "content": [{"type": "text", "text": "x", "api_key": "k-99"}]},
            ],
            llm_api_key=SECRET_KEY,
            metadata={"sleep": 60},
        )

        def some(document: dict[str, Any]) -> bool:
            return bool(document["steps"])

        await _preview_with(path, some)
        text = path.read_text()
        await w.cancel(ids=["secret"])
        await w.until_terminal("secret")
    for secret in (SECRET_KEY, "abcdefghijklmnop", "hunter22", "hunter33", "k-99"):
        assert secret not in text
    document = json.loads(text)
    assert document["steps"][0]["message"] == (
        "key [REDACTED]; Authorization: Bearer [REDACTED]; "
        "https://[REDACTED]@example.com/x; password=[REDACTED]"
    )
    assert document["steps"][1]["message"] == [
        {"type": "text", "text": "x", "api_key": "[REDACTED]"}
    ]


@pytest.mark.parametrize("how", ["keyword", "environment"])
async def test_the_root_comes_from_the_keyword_or_the_environment_at_start(
    wire: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    options: dict[str, Any] = {}
    if how == "keyword":
        options["preview_root"] = str(tmp_path)
    else:
        monkeypatch.setenv("_OSMOSIS_ROLLOUT_PREVIEW_ROOT", str(tmp_path))
    async with wire(**options) as w:
        await w.admit("rooted")
        await w.until_terminal("rooted")
        final = await _preview_with(
            tmp_path / "rooted" / "preview.json", lambda d: _osmosis(d)["status"] == "success"
        )
    assert final["steps"][-1]["message"] == "42"


async def test_no_previews_for_a_relative_root_an_empty_one_or_one_through_a_symlink(
    wire: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("_OSMOSIS_ROLLOUT_PREVIEW_ROOT", str(tmp_path / "from-env"))
    roots = {"relative": "relative-root", "linked": tmp_path / "link" / "previews", "off": ""}
    for name, root in roots.items():
        async with wire(preview_root=root) as w:
            await w.admit(name, metadata={"ticks": 5})
            await w.until_terminal(name)
    assert _names(tmp_path) == ["link", "real"]
    assert _names(real) == []


@pytest.mark.parametrize("rollout_id", ["-leading-dash", "x" * 257, "sp ace"])
async def test_ids_a_preview_folder_cannot_be_named_after_get_none(
    wire: Start, tmp_path: Path, rollout_id: str
) -> None:
    async with wire(preview_root=tmp_path) as w:
        await w.admit(rollout_id, metadata={"ticks": 5})
        _, final = await w.until_terminal(rollout_id)
    assert final["status"] == "success"
    assert _names(tmp_path) == []


async def test_the_demo_workflow_shows_its_conversation(
    serve: Serve, stub: tuple[str, httpx.AsyncClient], tmp_path: Path
) -> None:
    chat_url, _ = stub
    backend = LocalBackend(workflow=MultiplyWorkflow, grader=ExactMatchGrader)
    app = create_rollout_server(backend=backend, configure_logging=False, preview_root=tmp_path)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as http:
        w = Wire(http)
        await w.admit(
            "demo",
            chat_completions_url=f"{chat_url}/v1/rollouts/demo",
            llm_api_key=KEY,
            metadata={"sleep": 1.0},
        )
        path = tmp_path / "demo" / "preview.json"
        # While the row sleeps: the prompt, before any reply.
        running = await _preview_with(path, lambda d: _osmosis(d)["status"] == "running")
        _, final = await w.until_terminal("demo")
        await aclose_chat_client()
        done = await _preview_with(path, lambda d: _osmosis(d)["status"] == "success")
    assert final["status"] == "success"
    assert [step["message"] for step in running["steps"]] == ["What is 6 * 7?"]
    assert [step["message"] for step in done["steps"]] == ["What is 6 * 7?", "42"]
    assert _osmosis(done)["turn"] == 1
