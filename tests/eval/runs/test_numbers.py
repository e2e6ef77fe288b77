"""Odd numbers from the servers and the model, through the command: huge but finite rewards,
rewards that are not numbers, token counts that are not counts. Every run ends (and resumes)
without a traceback, and no results file holds a non-standard JSON token (NaN, Infinity)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from core.serving.loopback import serve_in_loop
from tests.eval.gateway.fake_upstream import Answer, FakeUpstream, completion
from tests.eval.runs.command import run_eval
from tests.eval.runs.files import read_jsonl, run_folder, write_jsonl
from tests.eval.runs.servers import threaded_server


def scripted_server() -> FastAPI:
    """A rollout server whose results are written by the rows: each row's `metadata.sample`
    is the raw JSON text of its result's sample (so it may hold `NaN`), and a row with
    `metadata.chat` first makes one model call through the run's gateway."""
    app = FastAPI()
    admitted: dict[str, dict[str, Any]] = {}

    @app.get("/health")
    async def health() -> JSONResponse:
        lifecycle = {"accepting_rollouts": True, "active_rollouts": 0}
        return JSONResponse({"status": "ok", "process_id": "scripted", "lifecycle": lifecycle})

    @app.post("/rollout")
    async def admit(request: Request) -> JSONResponse:
        body = await request.json()
        admitted[body["rollout_id"]] = body
        answer = {
            "rollout_id": body["rollout_id"],
            "status": "queued",
            "polling_lease_token": secrets.token_urlsafe(8),
            "result_wait_timeout_sec": 1.0,
            "polling_lease_timeout_sec": 30.0,
        }
        return JSONResponse(answer, status_code=202)

    @app.get("/rollout/{rollout_id}/result")
    async def result(rollout_id: str) -> Response:
        body = admitted[rollout_id]
        metadata = body["metadata"]
        if metadata.pop("chat", False):
            async with httpx.AsyncClient() as client:
                await client.post(
                    f"{body['chat_completions_url']}/chat/completions",
                    json={"messages": [{"role": "user", "content": "2 * 3?"}]},
                    headers={"Authorization": f"Bearer {body['llm_api_key']}"},
                )
        text = (
            f'{{"rollout_id": "{rollout_id}", "status": "success", "err_message": null, '
            f'"err_category": null, "sample": {metadata["sample"]}}}'
        )
        return Response(text, media_type="application/json")

    return app


def rows_with(samples: list[str], **metadata: Any) -> list[dict[str, Any]]:
    return [
        {"user_prompt": f"row {n}", "ground_truth": "1", "metadata": {"sample": s, **metadata}}
        for n, s in enumerate(samples)
    ]


def standard_json(text: str) -> Any:
    """`text` parsed, refusing the non-standard tokens Python's json writes by default."""

    def refuse(token: str) -> Any:
        raise AssertionError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def assert_results_are_standard_json(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.suffix == ".json":
            standard_json(path.read_text())
        elif path.suffix == ".jsonl":
            for line in path.read_text().splitlines():
                standard_json(line)


def eval_against(url: str, tmp_path: Path, rows: list[dict[str, Any]], *args: str) -> Any:
    dataset = write_jsonl(tmp_path / "rows.jsonl", rows)
    return run_eval(
        *("--server", url, "--dataset-file", str(dataset), "--name", "numbers", *args),
        cwd=tmp_path,
    )


def test_huge_finite_rewards_are_summarised_and_the_run_resumes(tmp_path: Path) -> None:
    samples = ['{"reward": 1e308}', '{"reward": 1e308}', '{"reward": -1.7e308}']
    folder = run_folder(tmp_path, "numbers")
    with threaded_server(lambda: serve_in_loop(scripted_server())) as url:
        first = eval_against(url, tmp_path, rows_with(samples), "--chat-url", "stub")
        assert first.returncode == 0, first.stderr
        again = eval_against(url, tmp_path, rows_with(samples), "--chat-url", "stub")
    assert again.returncode == 0, again.stderr
    for run in (first, again):
        assert "Traceback" not in run.stderr + run.stdout
    stats = standard_json((folder / "metrics.json").read_text())["summary"]["reward_stats"]
    assert stats["mean"] == pytest.approx(1e307, rel=1e-15)
    assert (stats["median"], stats["min"], stats["max"]) == (1e308, -1.7e308, 1e308)
    assert_results_are_standard_json(folder)


def test_a_reward_that_is_no_number_fails_its_item_and_the_run_goes_on(tmp_path: Path) -> None:
    # The client refuses such a result (as the official one does, which then halts the
    # whole run, for good: every resume meets the same result). Here only its item fails.
    samples = ['{"reward": NaN}', '{"reward": 1.0}', '{"reward": -Infinity}', '{"reward": "x"}']
    folder = run_folder(tmp_path, "numbers")
    with threaded_server(lambda: serve_in_loop(scripted_server())) as url:
        result = eval_against(url, tmp_path, rows_with(samples), "--chat-url", "stub")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    events = {event["row_index"]: event for event in read_jsonl(folder / "events.jsonl")}
    assert {row: event["status"] for row, event in events.items()} == {
        0: "failed",
        1: "success",
        2: "failed",
        3: "failed",
    }
    assert {events[row].get("error_type") for row in (0, 2, 3)} == {"invalid_reward"}
    assert "reward" not in events[0]
    log = (folder / "logs.txt").read_text()
    assert "reward nan, not a finite number" in log
    assert "reward -inf, not a finite number" in log
    assert 'reward "x", not a finite number' in log
    assert_results_are_standard_json(folder)


def test_token_counts_that_are_no_counts_are_unknown_with_a_warning(tmp_path: Path) -> None:
    odd = ["Infinity", "NaN", "-5", "12.5", "1e30", str(10**30), '"12"']
    samples = [f'{{"reward": 1.0, "metrics": {{"total_tokens": {value}}}}}' for value in odd]
    samples.append('{"reward": 1.0, "metrics": {"total_tokens": 12.0}}')  # a whole number
    folder = run_folder(tmp_path, "numbers")
    with threaded_server(lambda: serve_in_loop(scripted_server())) as url:
        result = eval_against(url, tmp_path, rows_with(samples), "--chat-url", "stub")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    tokens = {e["row_index"]: e.get("tokens") for e in read_jsonl(folder / "events.jsonl")}
    assert tokens == {**dict.fromkeys(range(len(odd))), len(odd): 12}
    log = (folder / "logs.txt").read_text()
    for shown in ("inf", "nan", "-5", "12.5", "1e+30", str(10**30), '"12"'):
        assert f"metrics.total_tokens = {shown} is not a token count" in log
    assert standard_json((folder / "metrics.json").read_text())["summary"]["tokens_used"] == 12
    assert_results_are_standard_json(folder)


def test_a_models_usage_that_is_no_count_is_unknown_with_a_warning(tmp_path: Path) -> None:
    fake = FakeUpstream()
    usage = '{"prompt_tokens": 7, "completion_tokens": -1, "total_tokens": Infinity}'
    body = json.dumps(completion(usage={})).replace('"usage": {}', f'"usage": {usage}')
    fake.respond = lambda _seen: Answer(text=body, headers={"content-type": "application/json"})
    samples = ['{"reward": 1.0}', '{"reward": 1.0}']
    folder = run_folder(tmp_path, "numbers")
    with (
        threaded_server(lambda: serve_in_loop(fake.app)) as chat_url,
        threaded_server(lambda: serve_in_loop(scripted_server())) as url,
    ):
        result = eval_against(
            url, tmp_path, rows_with(samples, chat=True), "--chat-url", f"{chat_url}/v1"
        )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert all("tokens" not in event for event in read_jsonl(folder / "events.jsonl"))
    calls = read_jsonl(folder / "calls.jsonl")
    assert len(calls) == 2
    assert all(call["status"] == 200 and call["prompt_tokens"] == 7 for call in calls)
    assert all("total_tokens" not in call and "completion_tokens" not in call for call in calls)
    log = (folder / "logs.txt").read_text()
    assert "usage.completion_tokens = -1, usage.total_tokens = inf" in log
    assert_results_are_standard_json(folder)


def test_a_huge_max_in_flight_starts_no_more_workers_than_items(tmp_path: Path) -> None:
    # The scripted server advertises no capacity, so nothing caps the concurrency asked for;
    # one worker per rollout in flight used to mean 100,000,000 tasks before the first send.
    folder = run_folder(tmp_path, "numbers")
    with threaded_server(lambda: serve_in_loop(scripted_server())) as url:
        rows = rows_with(['{"reward": 1.0}'] * 3)
        result = eval_against(
            url, tmp_path, rows, "--chat-url", "stub", "--max-in-flight", "100000000"
        )
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(folder / "events.jsonl")) == 3
