"""Hostile dataset rows and hostile server text on the way to the screen (issue 7 §2).

Huge prompts, `[bold]` markup, terminal escapes, bidi overrides and invalid UTF-8 must reach
the rollout server unchanged (they are the user's data) and reach the terminal only escaped.
The board keeps the raw text; each front end escapes what it draws: the headless reporter
through `terminal_safe`, the dashboard through `plain()` (Rich `Text`, never markup).

tests/eval/plan/test_dataset.py proves the loader keeps such values verbatim and quotes them
safely in its own error messages; here they go through a whole run.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from core.serving.loopback import serve_in_loop
from tests.eval.runs.command import run_eval
from tests.eval.runs.files import summary_of, write_jsonl
from tests.eval.runs.servers import threaded_server

HOSTILE = "[bold red]boom[/] \x1b[2J\x1b]0;pwned\x07 \r\u202eevil\u202c \x00 [link=file:///etc]x"
HUGE = "7 * 6 = ? " + "lorem ipsum " * 100_000  # 1.2 MB of prompt
# Anything that could steer a terminal: C0 controls but newline, DEL, C1, bidi controls.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def hostile_server(seen: list[dict[str, Any]]) -> FastAPI:
    """A rollout server that records each request and fails every other rollout with a
    hostile err_message and no category (so the message itself becomes the error_type)."""
    app = FastAPI()
    admitted: dict[str, int] = {}

    @app.get("/health")
    async def health() -> JSONResponse:
        return JSONResponse(
            {
                "status": "ok",
                "process_id": "hostile",
                "lifecycle": {"accepting_rollouts": True, "active_rollouts": 0},
            }
        )

    @app.post("/rollout")
    async def admit(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        admitted[body["rollout_id"]] = len(admitted)
        return JSONResponse(
            {
                "rollout_id": body["rollout_id"],
                "status": "queued",
                "polling_lease_token": secrets.token_urlsafe(8),
                "result_wait_timeout_sec": 1.0,
                "polling_lease_timeout_sec": 30.0,
            },
            status_code=202,
        )

    @app.get("/rollout/{rollout_id}/result")
    async def result(rollout_id: str) -> JSONResponse:
        body: dict[str, object]
        if admitted[rollout_id] % 2:
            body = {"status": "failure", "sample": None, "err_message": HOSTILE}
        else:
            sample = {"messages": [{"role": "assistant", "content": HOSTILE}], "reward": 1.0}
            body = {"status": "success", "sample": sample, "err_message": None}
        return JSONResponse({"rollout_id": rollout_id, "err_category": None, **body})

    return app


def test_hostile_rows_reach_the_server_verbatim_and_the_terminal_escaped(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"user_prompt": HOSTILE, "ground_truth": HOSTILE, "metadata": {"note": HOSTILE}},
        {"user_prompt": HUGE, "ground_truth": "42", "system_prompt": HOSTILE},
        {"user_prompt": "[bold]", "ground_truth": "[/]"},
        {"user_prompt": "\u202e\x1b[31m", "ground_truth": "\x1b[0m"},
    ]
    dataset = write_jsonl(tmp_path / "rows.jsonl", rows)
    seen: list[dict[str, Any]] = []
    with threaded_server(lambda: serve_in_loop(hostile_server(seen))) as url:
        result = run_eval(
            *("--server", url, "--dataset-file", str(dataset), "--name", "hostile"),
            *("--chat-url", "stub", "--max-in-flight", "1"),
            cwd=tmp_path,
        )
        as_json = run_eval(
            *("--server", url, "--dataset-file", str(dataset), "--name", "hostile-json"),
            *("--chat-url", "stub", "--json"),
            cwd=tmp_path,
        )
    assert result.returncode == 0, result.stderr
    # The server got the user's data untouched.
    by_prompt = {body["initial_messages"][-1]["content"]: body for body in seen[:4]}
    assert by_prompt[HOSTILE]["label"] == HOSTILE
    assert by_prompt[HOSTILE]["metadata"] == {"note": HOSTILE}
    assert by_prompt[HUGE]["initial_messages"][0] == {"role": "system", "content": HOSTILE}
    # The terminal got nothing it would act on: every control character escaped.
    for stream in (result.stdout, result.stderr, as_json.stdout, as_json.stderr):
        assert not RAW_CONTROL.findall(stream), RAW_CONTROL.findall(stream)[:5]
    # The hostile failure text is shown, escaped, in the item lines and the failed-rows list.
    assert "\\x1b[2J" in result.stdout
    assert "\\u202eevil" in result.stdout
    assert "Failed rows" in result.stdout
    # --json: one JSON document on stdout, the text intact inside it.
    summary = summary_of(as_json.stdout)
    assert summary["failed_rows"][0]["error_type"] == HOSTILE
    # And in the results files, JSON keeps the text exactly as the server sent it.
    events = (tmp_path / ".osmosis" / "evals" / "hostile" / "events.jsonl").read_text()
    assert {json.loads(line).get("error_type") for line in events.splitlines()} == {None, HOSTILE}


def test_invalid_utf8_in_the_dataset_is_bad_input_naming_the_line(tmp_path: Path) -> None:
    dataset = tmp_path / "rows.jsonl"
    dataset.write_bytes(
        json.dumps({"user_prompt": HOSTILE, "ground_truth": "1"}).encode()
        + b"\n"
        + b'{"user_prompt": "caf\xe9 \x1b[2J", "ground_truth": "2"}\n'
    )
    result = run_eval(
        *("--server", "http://127.0.0.1:9", "--dataset-file", str(dataset), "--name", "bad"),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert f"{dataset}:2:" in result.stderr
    assert "UTF-8" in result.stderr or "utf-8" in result.stderr
    assert not RAW_CONTROL.findall(result.stderr)
    assert not (tmp_path / ".osmosis").exists()


def test_the_dashboard_draws_untrusted_text_as_plain_text() -> None:
    from tui.widgets.format import plain

    for text in (HOSTILE, HUGE[:5000], "[bold]", "\u202e\x1b[31m"):
        drawn = plain(text)
        assert drawn.spans == [], "no markup was interpreted"
        assert not RAW_CONTROL.findall(drawn.plain)
        assert len(drawn.plain) == len(text)  # one replacement character per control one
