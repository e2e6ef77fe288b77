"""Bad input found once the run began (EVAL.md §1): a model that refuses the preflight, a port
given by a flag that is in use. Each exits 2 naming what is at fault, as bad input found before
does, and leaves no run folder behind: no `incomplete 0/N` run for `runs` to list. A resume's
folder, which holds results from before, is kept."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from core.serving.loopback import serve_in_loop
from tests.eval.runs.command import run_eval, run_osmosis
from tests.eval.runs.files import read_jsonl, run_folder
from tests.eval.runs.servers import threaded_server
from tests.polling import eventually_sync
from tests.tui.pty_eval import PtyEval


@contextmanager
def taken_port() -> Iterator[int]:
    """A loopback port another socket listens on for the duration of the block."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


async def refuse(_request: Request) -> JSONResponse:
    return JSONResponse({"error": {"message": "invalid api key"}}, status_code=401)


def assert_nothing_left(cwd: Path) -> None:
    """No run folder under the results root, and `runs` lists none."""
    evals = cwd / ".osmosis" / "evals"
    assert not [path.name for path in evals.glob("*") if path.is_dir() and path.name != ".locks"]
    listed = run_osmosis("runs", "--json", cwd=cwd)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["runs"] == []


def test_a_refused_preflight_exits_2_and_leaves_no_run_folder(tmp_path: Path) -> None:
    model = Starlette(routes=[Route("/v1/chat/completions", refuse, methods=["POST"])])
    with threaded_server(lambda: serve_in_loop(model)) as url:
        result = run_eval(
            *("--rows", "0-1", "--headless", "--name", "refused", "--chat-url", f"{url}/v1"),
            cwd=tmp_path,
        )
    assert result.returncode == 2, result.stderr
    assert "osmosis-tui eval: model preflight for 'osmosis-stub' failed (HTTP 401)" in result.stderr
    assert "resume" not in result.stderr
    assert_nothing_left(tmp_path)


@pytest.mark.parametrize(
    ("flag", "listener"),
    [("--listener-port", "the model gateway"), ("--events-port", "the event receiver")],
)
def test_a_listeners_port_in_use_exits_2_naming_the_flag_and_leaves_no_run_folder(
    tmp_path: Path, flag: str, listener: str
) -> None:
    with taken_port() as port:
        result = run_eval(
            *("--rows", "0-1", "--headless", "--name", "taken", flag, str(port)),
            cwd=tmp_path,
        )
    assert result.returncode == 2, result.stderr
    assert f"{flag}: could not bind {listener} on 127.0.0.1:{port}" in result.stderr
    assert_nothing_left(tmp_path)


def test_a_rollout_port_in_use_is_bad_input_naming_the_flag(workspace: Path) -> None:
    with taken_port() as port:
        result = run_eval(
            *("configs/eval/multiply.toml", "--chat-url", "stub", "--headless"),
            *("--name", "taken", "--rollout-port", str(port)),
            cwd=workspace,
        )
    assert result.returncode == 2, result.stderr
    assert f"--rollout-port: port {port} is in use on 127.0.0.1" in result.stderr
    assert "resume" not in result.stderr
    assert_nothing_left(workspace)


def test_a_fresh_restart_refused_puts_the_archived_folder_back(tmp_path: Path) -> None:
    first = run_eval("--rows", "0-1", "--headless", "--name", "kept", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    folder = run_folder(tmp_path, "kept")
    before = read_jsonl(folder / "events.jsonl")
    with taken_port() as port:
        result = run_eval(
            *("--rows", "0-1", "--headless", "--name", "kept", "--fresh"),
            *("--listener-port", str(port)),
            cwd=tmp_path,
        )
    assert result.returncode == 2, result.stderr
    assert read_jsonl(folder / "events.jsonl") == before
    assert [path.name for path in folder.parent.glob("kept*")] == ["kept"], "no archive left"


def test_a_resume_refused_at_start_keeps_its_folder(tmp_path: Path) -> None:
    first = run_eval("--rows", "0-3", "--headless", "--name", "kept", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    folder = run_folder(tmp_path, "kept")
    # Two items left to run: the journal, the only authority for resume, lacks them.
    journal = folder / "events.jsonl"
    journal.write_text("".join(journal.read_text().splitlines(keepends=True)[:2]))
    before = read_jsonl(journal)
    with taken_port() as port:
        result = run_eval(
            *("--rows", "0-3", "--headless", "--name", "kept", "--listener-port", str(port)),
            cwd=tmp_path,
        )
    assert result.returncode == 2, result.stderr
    assert "--listener-port: " in result.stderr
    assert read_jsonl(folder / "events.jsonl") == before
    assert (folder / "manifest.json").is_file()


def test_the_dashboard_says_the_refusal_and_exits_2_leaving_no_run_folder(
    tmp_path: Path,
) -> None:
    with taken_port() as port:
        run = PtyEval(
            tmp_path, "taken", "--rows", "0-1", "--listener-port", str(port), controlling=False
        )
        try:
            run.wait_for_screen(b"q quits", "the refusal on the dashboard")
            run.type(b"q")
            eventually_sync(lambda: run.read() and run.process.poll() is not None, "the exit")
            screen = run.read()
        finally:
            code = run.finish(timeout=20)
    assert code == 2, screen.decode(errors="replace")
    assert b"--listener-port: could not bind the model gateway" in screen
    # Nothing ran: there is no run to wind down, and no results to write.
    assert b"winding the run down" not in screen
    assert run.name_is_free()
    assert_nothing_left(tmp_path)
