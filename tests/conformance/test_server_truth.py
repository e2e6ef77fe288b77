"""Phase truth from an official server (issue 13, EVAL.md §6): its ownership events reach the board.

The eval launches the official-layout workspace (`results_workspace/`, an official 0.3.8
server run by uv on the conformance venv's Python) with its event receiver's endpoint and a
previews folder, against a stub model that takes seconds per answer. While the run goes, a
watcher reads the board: every rollout that calls the model must show `running` from the
server's own event while that call is still in flight (the official server holds each poll
until the next change, so no poll sees it). One rollout is cancelled while it runs: it shows
running, then cancelled, and transitions.jsonl says so with the server as the source.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import pytest

from core.eval import EvalRequest, EvalSession, prepare
from core.eval.event_silence import EventSilence
from core.eval.results.transitions import read_transitions
from core.rollout_record import RolloutRecord
from core.serving.loopback import serve_in_loop
from core.types import RolloutStatus
from server_stub.llm import create_chat_app
from server_stub.llm_behaviour import StubChatSettings
from server_stub.llm_latency import FixedLatency
from tests.conformance.official_eval import CONFIG, DATASET, EVALS, make_workspace, official_env
from tests.conformance.official_servers import official_server

pytestmark = pytest.mark.conformance

R, C = RolloutStatus.RUNNING, RolloutStatus.CANCELLED
MODEL_SECONDS = 4.0
WATCH_INTERVAL_SEC = 0.05


async def test_running_comes_from_the_servers_events_while_the_model_is_called(
    official_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = make_workspace(tmp_path / "workspace")
    # The launcher runs the rollout with uv on the conformance venv's Python (as the
    # results-folder tests do), with none of this interpreter's packages on its path.
    uv_env = official_env(official_python)
    for name in ("PATH", "UV_PYTHON", "UV_PYTHON_DOWNLOADS"):
        monkeypatch.setenv(name, uv_env[name])
    monkeypatch.delenv("PYTHONPATH", raising=False)
    model = create_chat_app(StubChatSettings(latency=FixedLatency(MODEL_SECONDS)))
    async with serve_in_loop(model) as model_url:
        plan = prepare(
            EvalRequest(
                config_path=workspace / CONFIG,
                dataset_file=workspace / DATASET,
                chat_url=f"{model_url}/v1",
                name="truth",
                max_in_flight=4,
            )
        )
        session = EvalSession(plan)
        board = session.board
        confirmed_in_call: set[str] = set()
        called: set[str] = set()
        cancelled: list[str] = []

        async def watch() -> None:
            while True:
                for record in board:
                    if not record.model.in_flight:
                        continue
                    called.add(record.rollout_id)
                    mark = record.marks.get(R)
                    if mark is None or mark.source != "server":
                        continue
                    confirmed_in_call.add(record.rollout_id)
                    assert record.status is R or record.finished
                    if not cancelled and not record.finished:
                        cancelled.append(record.rollout_id)
                        await board.cancel_on_server([record.rollout_id])
                await asyncio.sleep(WATCH_INTERVAL_SEC)

        watcher = asyncio.ensure_future(watch())
        try:
            summary = await session.run()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    # The cancelled rollout's work item is left for a resume, as the official tool leaves it.
    assert (summary.status, summary.pending, summary.problem) == ("incomplete", 1, None)
    # Every rollout that called the model was seen running, by the server's word, mid-call.
    assert called and called == confirmed_in_call

    (victim,) = cancelled
    record = board.records[victim]
    assert record.status is C
    assert [cancel.disposition for cancel in record.cancels] == ["cancelled_running"]
    assert [mark.status for mark in record.timeline()][-2:] == [R, C]
    assert record.marks[R].source == "server" and record.marks[C].source == "server"

    folder = workspace / EVALS / "truth"
    lines = [
        line
        for line in read_transitions(folder / "transitions.jsonl")
        if line["kind"] == "status" and line["rollout_id"] == victim
    ]
    from_server = [line["status"] for line in lines if line["source"] == "server"]
    assert from_server == ["queued", "running", "cancelled"]
    assert all(line["server_time"].endswith("Z") for line in lines if line["source"] == "server")
    assert {line["source"] for line in lines} == {"server", "poll"}


# -- without the server's events: the model gateway's word (issue 24) ------------------------

SLOW_MODEL_SECONDS = 6.0
STUCK_AFTER_SEC = 2.0
# How far after its first model call began a row may still read something else than running.
WITHIN_SEC = 1.0


def _first_call(record: RolloutRecord) -> float | None:
    calls = [*record.model.in_flight.values(), *record.model.recent]
    return min((call.started_monotonic for call in calls), default=None)


async def test_without_events_a_row_is_running_from_its_first_model_call(
    official_python: Path, tmp_path: Path
) -> None:
    """A `--server` run against an official server started without
    OSMOSIS_ROLLOUT_OTLP_ENDPOINT: no ownership event comes, and the server holds each poll
    until the next change. Each rollout waits on a slow model: its row reads `running` from
    its first model call, is flagged stuck on time, and once finished does not say that
    `running` happened unseen. The run says that no event came, with the settings to start
    the server with."""
    rows = [{"user_prompt": f"What is {n} * 7?", "ground_truth": str(n * 7)} for n in (2, 3, 4)]
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    model = create_chat_app(StubChatSettings(latency=FixedLatency(SLOW_MODEL_SECONDS)))
    async with (
        serve_in_loop(model) as model_url,
        official_server(official_python, "asking", ["--backend", "asking"], tmp_path) as server,
    ):
        plan = prepare(
            EvalRequest(
                servers=(server.url,),
                dataset_file=dataset,
                output=tmp_path / "out",
                name="no-events",
                chat_url=f"{model_url}/v1",
                max_in_flight=len(rows),
                stuck_after_sec=STUCK_AFTER_SEC,
            )
        )
        session = EvalSession(plan)
        board = session.board
        called: set[str] = set()
        stuck_on_time: set[str] = set()
        silences: list[EventSilence] = []

        async def watch() -> None:
            while True:
                now = time.monotonic()
                silence = session.event_silence(now)
                if silence is not None and not silences:
                    silences.append(silence)
                for record in board:
                    first = _first_call(record)
                    waiting = bool(record.model.in_flight) and not record.finished
                    if first is None or not waiting or now - first < WITHIN_SEC:
                        continue
                    # Waiting on the model: running, from (at most a second after) the call.
                    called.add(record.rollout_id)
                    assert record.status is R, (record.rollout_id, record.status)
                    assert record.marks[R].at <= first + WITHIN_SEC
                    if now - first > STUCK_AFTER_SEC + WITHIN_SEC:
                        assert record.rollout_id in board.stuck_ids(now)
                        stuck_on_time.add(record.rollout_id)
                await asyncio.sleep(WATCH_INTERVAL_SEC)

        watcher = asyncio.ensure_future(watch())
        try:
            summary = await session.run()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    assert (summary.status, summary.problem) == ("complete", None)
    records = list(board)
    assert len(records) == len(rows)
    # The scenario: nothing came from the server itself.
    assert all(mark.source != "server" for record in records for mark in record.marks.values())
    assert called == stuck_on_time == {record.rollout_id for record in records}
    # And the run said so, with the settings to start the server with.
    (silence,) = silences
    assert silence.servers == (server.url,)
    assert silence.endpoint.startswith("http://127.0.0.1:") and not silence.port_fixed
    assert silence.preview_root == str((tmp_path / "out" / "no-events" / "previews").absolute())
    for record in records:
        assert record.finished and record.model.calls >= 1
        assert R not in record.skipped_phases()
        first = _first_call(record)
        assert first is not None and record.marks[R].at <= first
