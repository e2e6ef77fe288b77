"""Nobody let in, nothing leaked (issue 7 §4).

Already proven elsewhere: bearer auth guards every route (tests/server/test_protocol.py); the
LLM key and the server key reach their servers, and neither they nor the run's gateway bearer
reach any file or terminal output of a run (tests/eval/runs/test_secrets.py); the dashboard
export of an ordinary failure holds no key (tests/tui/test_actions.py); a symlinked entrypoint
is refused (tests/eval/runs/test_workspace.py); results files are 0600 (tests/eval/results/,
one test file per file kind).
"""

from __future__ import annotations

import contextlib
import hmac
import io
import os
import queue
import re
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from rich.console import Console
from starlette.applications import Starlette

from core.eval.gateway.errors import PreflightError
from core.eval.results.export import export_row
from core.eval.servers.embedded import demo_rollout_server, stub_chat_endpoint
from core.eval.servers.launcher import LaunchError, free_port, resolve_entrypoint
from core.eval.servers.uv_project import server_command
from core.serving.loopback import serve_in_loop
from server_stub import (
    AgentWorkflow,
    AgentWorkflowOutput,
    LocalBackend,
    create_rollout_server,
    get_rollout_context,
)
from server_stub.demo import SLOW_SEC, demo_rows
from server_stub.llm import create_chat_app
from server_stub.standalone import is_loopback
from server_stub.workflow import AgentWorkflowContext
from tests.eval.events.otlp import export_request, ownership_attributes
from tests.eval.events.otlp import record as otlp_record
from tests.eval.gateway.fake_upstream import (
    Answer,
    FakeUpstream,
    completion,
    error,
    quoting_the_key,
)
from tests.eval.runs.command import child_env, osmosis, start_eval
from tests.eval.runs.files import multiply_rows, read_jsonl, run_folder
from tests.eval.runs.servers import ServedDemo
from tests.polling import eventually, eventually_sync
from tests.reliability.in_process import demo_app, rollout_server, run_session
from tests.server.plugins import Echo, ExactMatch
from tui.cli import build_parser
from tui.widgets.details import describe

LLM_KEY = "llm-" + "5f3c9a1e" * 4
SERVER_KEY = "srv-" + "0b7d2e64" * 4


# -- binding ------------------------------------------------------------------------------------


def test_serve_binds_loopback_unless_told_otherwise(demo_server: ServedDemo) -> None:
    assert build_parser().parse_args(["serve", "--demo"]).host == "127.0.0.1"
    assert demo_server.url.startswith("http://127.0.0.1:")
    assert demo_server.chat_url.startswith("http://127.0.0.1:")
    assert [is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost")] == [True] * 4
    assert [is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.10", "example.com")] == [False] * 4


async def test_the_embedded_servers_bind_loopback() -> None:
    async with demo_rollout_server() as rollout_url, stub_chat_endpoint() as chat_url:
        assert rollout_url.startswith("http://127.0.0.1:")
        assert chat_url.startswith("http://127.0.0.1:")


@contextlib.contextmanager
def serving(*args: str) -> Iterator[tuple[list[str], list[str]]]:
    """`osmosis-tui serve --demo --port 0 ARGS`; yields its stdout and stderr lines once it
    printed its URL (they go on filling up). Stopped (by its PID) at the end, its output read
    to the end."""
    process = subprocess.Popen(
        osmosis("serve", "--demo", "--port", "0", *args),
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out: list[str] = []
    err: list[str] = []
    started: queue.Queue[bool] = queue.Queue()

    def pump(stream: Any, into: list[str], signal_start: bool) -> None:
        for line in stream:
            into.append(line)
            if signal_start and line.startswith("rollout server: "):
                started.put(True)
        if signal_start:
            started.put(False)

    threads = [
        threading.Thread(target=pump, args=(process.stdout, out, True), daemon=True),
        threading.Thread(target=pump, args=(process.stderr, err, False), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        assert started.get(timeout=60), "".join(err)
        yield out, err
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for thread in threads:
            thread.join(timeout=5)


def test_serving_on_every_interface_without_a_key_warns() -> None:
    with serving("--host", "0.0.0.0") as (out, err):
        warning = "".join(err)
        url = out[0]
    assert url.startswith("rollout server: http://0.0.0.0:")
    assert "warning: serving on 0.0.0.0 without --api-key" in warning
    assert "anyone who can reach this address can start and cancel rollouts" in warning


def test_serving_on_every_interface_with_a_key_does_not_warn() -> None:
    with serving("--host", "0.0.0.0", "--api-key", SERVER_KEY) as (out, err):
        pass
    assert "warning" not in "".join(err)
    assert SERVER_KEY not in "".join(out + err)


# A rollout id with line breaks, as a client may send one: the server's log must not take it
# for lines of its own.
FORGED = "\n2026-12-01 00:00:00 CRITICAL forged: every key was rotated\r\nINFO:forged"


def answers_health(url: str) -> bool:
    try:
        bearer = {"Authorization": f"Bearer {SERVER_KEY}"}
        return httpx.get(f"{url}/health", headers=bearer).is_success
    except httpx.TransportError:
        return False


async def test_serve_logs_neither_key_nor_a_forged_line_when_a_gateway_quotes_the_key() -> None:
    fake = FakeUpstream()
    fake.respond = quoting_the_key(401)  # a gateway refusing the key, quoting it back
    rollouts = 20
    with serving("--api-key", SERVER_KEY) as (out, err):
        url = out[0].removeprefix("rollout server: ").strip()
        eventually_sync(lambda: answers_health(url), "the server to answer /health")
        async with (
            serve_in_loop(fake.app) as gateway,
            httpx.AsyncClient(headers={"Authorization": f"Bearer {SERVER_KEY}"}) as http,
        ):
            for number in range(rollouts):
                # Sent as any client may send it (RolloutClient cannot poll such an id: httpx
                # refuses a line break in a URL).
                admitted = await http.post(
                    f"{url}/rollout",
                    json={
                        "rollout_id": f"r{number}{FORGED}",
                        "initial_messages": [{"role": "user", "content": "2*3"}],
                        "chat_completions_url": f"{gateway}/v1",
                        "llm_api_key": LLM_KEY,
                    },
                )
                assert admitted.status_code == 202, admitted.text
            await eventually(
                lambda: "".join(err).count(" failed: ") >= rollouts, "every workflow to fail"
            )
    assert len(fake.requests) == rollouts
    log = "".join(err)
    # The workflow's failure is logged once per rollout, with the key masked ...
    assert log.count("Incorrect API key provided: ***") == rollouts, log
    assert LLM_KEY not in log and SERVER_KEY not in log
    # ... and its id escaped: every line is one the server wrote.
    escaped = "r0\\n2026-12-01 00:00:00 CRITICAL forged: every key was rotated\\r\\nINFO:forged"
    assert escaped in log, log
    assert not [line for line in log.splitlines() if "forged" in line.partition(" rollout ")[0]]


class ForgingWorkflow(AgentWorkflow[Any]):
    """A rollout that calls the run's gateway under its own id with a forged line appended
    (as a buggy or hostile rollout server may), then answers the ground truth."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        rollout = get_rollout_context()
        assert rollout is not None and rollout.api_key
        base = rollout.chat_completions_url.rsplit("/", 1)[0]
        forged = quote(f"{rollout.rollout_id}{FORGED}", safe="")
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"{base}/{forged}/chat/completions",
                json={"messages": [{"role": "user", "content": "forge"}]},
                headers={"Authorization": f"Bearer {rollout.api_key}"},
            )
        assert answer.status_code == 429, answer.text
        return AgentWorkflowOutput(messages=[*ctx.prompt, {"role": "assistant", "content": "x"}])


async def test_a_rollout_id_with_line_breaks_forges_no_line_of_the_evals_log(
    tmp_path: Path,
) -> None:
    fake = FakeUpstream()
    fake.respond = lambda seen: (
        error(429, "slow down", **{"x-should-retry": "false"})
        if seen.body["messages"][-1]["content"] == "forge"
        else Answer(body=completion())
    )
    app = demo_app(workflow=ForgingWorkflow, grader=ExactMatch)
    async with serve_in_loop(fake.app) as model, rollout_server(app) as url:
        run = await run_session(
            tmp_path, multiply_rows(2, grade=False), servers=(url,), chat_url=f"{model}/v1"
        )
    assert run.summary.count("success") == 2
    lines = (run.folder / "logs.txt").read_text().splitlines()
    refused = [line for line in lines if "model call for rollout" in line]
    assert len(refused) == 2, lines
    for line in refused:
        assert (
            "\\n2026-12-01 00:00:00 CRITICAL forged: every key was rotated\\r\\nINFO:forged" in line
        )
        assert line.endswith(
            'failed: {"error":{"message":"slow down","type":"fake_error","code":null}}'
        )
    assert [line for line in lines if "forged" in line] == refused


def test_the_zero_setup_evals_server_refuses_another_local_processs_cancel(
    tmp_path: Path,
) -> None:
    # The bundled demo's slow rows (3 s each): in flight together while another process tries.
    slow = [
        str(number)
        for number, row in enumerate(demo_rows())
        if (row.get("metadata") or {}).get("stub") == f"slow:{SLOW_SEC:g}"
    ]
    rows = len(slow)
    assert rows >= 4
    run = start_eval("--headless", "--rows", ",".join(slow), "--name", "zero", cwd=tmp_path)
    folder = run_folder(tmp_path, "zero")

    def running_on_the_demo_server() -> str | None:
        """The embedded server's URL once a rollout runs there (None before)."""
        logs = folder / "logs.txt"
        found = (
            re.search(r"\[listener\] demo rollout server on (\S+)", logs.read_text())
            if logs.exists()
            else None
        )
        if run.process.poll() is not None:
            pytest.fail(f"the run ended before its server was named in logs.txt: {run.stderr()}")
        running = any(
            t.get("status") == "running" for t in read_jsonl(folder / "transitions.jsonl")
        )
        return found.group(1) if found and running else None

    url = eventually_sync(running_on_the_demo_server, "a rollout running on the demo server")
    # Another local process, with no key or a wrong one: refused before anything is done.
    for headers in ({}, {"Authorization": "Bearer not-the-key"}):
        refused = httpx.post(f"{url}/rollout/cancel", json={"all": True}, headers=headers)
        assert refused.status_code == 401, refused.text
        assert httpx.get(f"{url}/health", headers=headers).status_code == 401
    stdout, stderr = run.finish()
    assert run.returncode == 0, stderr
    index = read_jsonl(folder / "index.jsonl")
    assert [r["status"] for r in index] == ["success"] * rows, "no rollout was cancelled"
    assert not [
        t for t in read_jsonl(folder / "transitions.jsonl") if t["kind"] == "cancel_request"
    ]
    # The run's own bearer is masked like every key: nothing written shows a bearer value.
    assert not re.search(r"Bearer (?!\*\*\*)\S", "".join(run_texts(folder)) + stdout + stderr)


# -- constant-time comparisons ----------------------------------------------------------------


class CompareSpy:
    def __init__(self) -> None:
        self.original = hmac.compare_digest
        self.calls: list[tuple[Any, Any]] = []

    def __call__(self, a: Any, b: Any) -> bool:
        self.calls.append((a, b))
        return self.original(a, b)


@pytest.fixture
def compare_spy(monkeypatch: pytest.MonkeyPatch) -> CompareSpy:
    spy = CompareSpy()
    monkeypatch.setattr(hmac, "compare_digest", spy)
    return spy


async def test_the_server_bearer_and_the_lease_are_compared_in_constant_time(
    compare_spy: CompareSpy,
) -> None:
    app = create_rollout_server(
        backend=LocalBackend(workflow=Echo, grader=ExactMatch),
        api_key=SERVER_KEY,
        configure_logging=False,
        result_wait_timeout_sec=0.1,
        polling_lease_timeout_sec=5.0,
    )
    good = {"Authorization": f"Bearer {SERVER_KEY}"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        refused = await http.get("/health", headers={"Authorization": f"Bearer {SERVER_KEY[:-1]}x"})
        bearer_calls = list(compare_spy.calls)
        body = {
            "rollout_id": "ct",
            "initial_messages": [],
            "chat_completions_url": "u",
            "label": "42",
        }
        admitted = (await http.post("/rollout", json=body, headers=good)).json()
        compare_spy.calls.clear()
        lease = {"X-Osmosis-Rollout-Lease": "not-the-token", **good}
        forbidden = await http.get("/rollout/ct/result", headers=lease)
        await http.post("/rollout/cancel", json={"ids": ["ct"]}, headers=good)
    assert refused.status_code == 401
    assert bearer_calls == [
        (f"Bearer {SERVER_KEY[:-1]}x".encode(), f"Bearer {SERVER_KEY}".encode())
    ]
    assert admitted["status"] == "queued"
    assert forbidden.status_code == 403
    # The bearer check, then the lease check: digests of the same length, never the token.
    assert len(compare_spy.calls) >= 2
    lease_calls = [c for c in compare_spy.calls if isinstance(c[0], bytes) and len(c[0]) == 32]
    assert lease_calls and all(len(b) == 32 for _, b in lease_calls)
    assert all(admitted["polling_lease_token"].encode() not in (a, b) for a, b in compare_spy.calls)


async def test_the_stub_chat_endpoint_compares_its_key_in_constant_time(
    compare_spy: CompareSpy,
) -> None:
    app = create_chat_app(api_key=LLM_KEY)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        response = await http.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "2*3"}]},
            headers={"Authorization": "Bearer wrong"},
        )
    assert response.status_code == 401
    assert LLM_KEY not in response.text
    assert compare_spy.calls, "the key check went through hmac.compare_digest"


# -- keys in error messages, the board and the dashboard export ----------------------------------


def echoing_upstream(status: int) -> Starlette:
    """A model that refuses every call with `status`, quoting the key it got."""
    fake = FakeUpstream()
    fake.respond = quoting_the_key(status)
    return fake.app


def run_texts(folder: Path) -> list[str]:
    return [path.read_text() for path in folder.rglob("*") if path.is_file()]


async def test_a_model_quoting_the_key_back_leaks_it_nowhere(tmp_path: Path) -> None:
    app = demo_app()
    async with serve_in_loop(echoing_upstream(429)) as model, rollout_server(app) as url:
        # A rate limit: the preflight only warns, and every rollout's call fails.
        run = await run_session(
            tmp_path,
            multiply_rows(3),
            servers=(url,),
            chat_url=f"{model}/v1",
            llm_api_key=LLM_KEY,
        )
    assert run.summary.count("failed") == 3
    assert any("model preflight for 'osmosis-stub': rate limited" in n for n in run.notices)
    board = list(run.session.board)
    messages = [r.latest_result.err_message or "" for r in board if r.latest_result]
    # The model's text reaches the rollout through the gateway, the key in it masked ...
    assert len(messages) == 3
    assert all(m.startswith("chat endpoint answered HTTP 429: ") for m in messages), messages
    assert all("Incorrect API key provided: ***" in m for m in messages), messages
    # ... and the gateway's records of the calls hold it masked too.
    calls = [r.model.recent[-1] for r in board]
    assert all("Incorrect API key provided: ***" in (c.error or "") for c in calls)
    # Nothing drawn, exported or written has it.
    exported = [export_row(record, run.session.board.started_at) for record in board]
    texts = [repr(row) for row in exported] + [repr(c) for c in calls]
    texts += run_texts(run.folder) + run.notices
    assert any("Incorrect API key provided: ***" in text for text in run_texts(run.folder))
    for text in texts:
        assert LLM_KEY not in text


async def test_a_model_refusing_the_key_stops_the_run_with_the_key_masked(
    tmp_path: Path,
) -> None:
    app = demo_app()
    async with serve_in_loop(echoing_upstream(401)) as model, rollout_server(app) as url:
        with pytest.raises(PreflightError) as refused:
            await run_session(
                tmp_path,
                multiply_rows(3),
                servers=(url,),
                chat_url=f"{model}/v1",
                llm_api_key=LLM_KEY,
            )
    message = str(refused.value)
    assert message.startswith("model preflight for 'osmosis-stub' failed (HTTP 401): ")
    assert "Incorrect API key provided: ***" in message
    assert not app.state.rollout_futures, "no rollout was sent"
    assert LLM_KEY not in message
    # Bad input leaves no run folder behind (its log went with it): nothing holds the key.
    assert not (tmp_path / "out" / "run").exists()
    assert all(LLM_KEY not in text for text in run_texts(tmp_path / "out"))


def drawn(renderable: Any) -> str:
    """What a terminal 100 columns wide shows of `renderable`."""
    console = Console(width=100, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


async def test_a_model_echoing_the_key_in_its_reply_is_masked_in_the_details_pane(
    tmp_path: Path,
) -> None:
    fake = FakeUpstream()
    # A model that repeats the key it was sent in its answer (to the preflight as well).
    fake.respond = lambda seen: Answer(
        body=completion("6 " + seen.headers.get("authorization", "").removeprefix("Bearer "))
    )
    async with serve_in_loop(fake.app) as model, rollout_server(demo_app()) as url:
        run = await run_session(
            tmp_path,
            multiply_rows(2, metadata={"token": LLM_KEY}),
            servers=(url,),
            chat_url=f"{model}/v1",
            llm_api_key=LLM_KEY,
            server_api_key=None,
        )
    board = run.session.board
    records = list(board)
    assert len(records) == 2
    for record in records:
        sample = record.latest_result.sample if record.latest_result else None
        assert sample is not None
        # The reply reached the sample as the model wrote it: the workflow's own data ...
        assert any(LLM_KEY in str(message.get("content")) for message in sample.messages)
        # ... and the pane draws it, the request's metadata and the model call masked.
        pane = drawn(describe(record, board, now=time.monotonic()))
        assert "6 ***" in pane, pane
        assert "last reply" in pane
        assert LLM_KEY not in pane, pane
        assert LLM_KEY[:20] not in pane.replace("\n", ""), "not even cut by a line break"


# -- file modes ---------------------------------------------------------------------------------


async def test_results_and_logs_are_private_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)  # the most permissive a user could have
    try:
        async with rollout_server(demo_app()) as url:
            run = await run_session(tmp_path, multiply_rows(2), servers=(url,), chat_url="stub")
    finally:
        os.umask(previous)
    folder = run.folder
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = {path.name: stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()}
    assert files == {
        **dict.fromkeys(
            [
                "manifest.json",
                "events.jsonl",
                "transitions.jsonl",
                "index.jsonl",
                "summary.jsonl",
                "progress.json",
                "metrics.json",
                "logs.txt",
                "calls.jsonl",
            ],
            0o600,
        ),
        "rollout_trials": 0o700,
        # The servers' live transcripts (PROTOCOL.md §8.2), as private as the rest.
        "previews": 0o700,
    }
    lock = folder.parent / ".locks" / f"{folder.name}.lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


# -- the workspace launcher stays inside rollouts/<rollout>/ -------------------------------------


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "rollouts" / "good" / "sub").mkdir(parents=True)
    (root / "rollouts" / "good" / "main.py").write_text("print('ok')\n")
    (root / "rollouts" / "good" / "sub" / "run.py").write_text("print('ok')\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "main.py").write_text("raise SystemExit('must never run')\n")
    # Both are uv projects: a refusal is never only a missing pyproject.toml.
    for project in (root / "rollouts" / "good", outside):
        (project / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\n')
    (root / "rollouts" / "linked").symlink_to(outside, target_is_directory=True)
    (root / "rollouts" / "good" / "escape").symlink_to(outside, target_is_directory=True)
    return root


@pytest.mark.parametrize(
    ("rollout", "entrypoint"),
    [
        ("../outside", "main.py"),
        ("..", "outside/main.py"),
        ("", "good/main.py"),
        (".", "good/main.py"),
        ("good", "../linked/main.py"),
        ("good", "../../../outside/main.py"),
        ("good", "/etc/passwd"),
        ("/tmp", "main.py"),
        ("linked", "main.py"),  # a rollout folder that is a symlink out of rollouts/
        ("good", "escape/main.py"),  # a subfolder that is a symlink out of the rollout
        ("good/sub", "run.py"),  # one folder name, not a path
    ],
)
def test_the_launcher_refuses_every_way_out_of_the_rollout_folder(
    tmp_path: Path, rollout: str, entrypoint: str
) -> None:
    with pytest.raises(LaunchError, match=r"leave rollouts/|not found"):
        resolve_entrypoint(workspace(tmp_path), rollout, entrypoint)


def test_the_launcher_runs_the_entrypoint_from_inside_its_folder(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    folder, target = resolve_entrypoint(root, "good", "sub/run.py")
    assert folder == (root / "rollouts" / "good").resolve()
    assert target == folder / "sub" / "run.py"
    # In the rollout's own environment; the launcher starts it with the folder as its cwd
    # (tests/eval/runs/test_workspace.py reads both from the launched process).
    assert server_command("uv", folder, target) == [
        *("uv", "run", "--no-sync", "--project", str(folder)),
        *("python", str(target)),
    ]


def test_the_launcher_refuses_a_rollout_folder_that_is_no_uv_project(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    (root / "rollouts" / "good" / "pyproject.toml").unlink()
    # Above it sits another project, which `uv --project` would find and sync instead.
    (root / "pyproject.toml").write_text('[project]\nname = "workspace"\nversion = "0"\n')
    with pytest.raises(LaunchError, match=r"^rollouts/good/pyproject\.toml not found: "):
        resolve_entrypoint(root, "good", "main.py")


def test_forged_ownership_events_change_no_rollout_and_are_not_journaled(
    tmp_path: Path,
) -> None:
    """Issue 30 §13: another local process posts ownership events for a live rollout of a
    real eval, to its event receiver: a success dated 1970 with sequence 2**63-1 and a running
    dated 2200 (its server's id), a cancel from another `server_id` (dated now). None of them
    is journaled into transitions.jsonl or moves a phase; the run ends as it would have."""
    port = free_port()
    slow = [
        str(number)
        for number, row in enumerate(demo_rows())
        if (row.get("metadata") or {}).get("stub") == f"slow:{SLOW_SEC:g}"
    ][:4]
    run = start_eval(
        *("--headless", "--rows", ",".join(slow), "--name", "forged"),
        *("--events-port", str(port)),
        cwd=tmp_path,
    )
    folder = run_folder(tmp_path, "forged")

    def reported_running() -> dict[str, Any] | None:
        """A `running` its server reported for a rollout still in flight (None before)."""
        if run.process.poll() is not None:
            pytest.fail(f"the run ended before a rollout ran: {run.stderr()}")
        lines = read_jsonl(folder / "transitions.jsonl")
        done = {line["rollout_id"] for line in lines if line.get("status") == "success"}
        return next(
            (
                line
                for line in lines
                if line.get("source") == "server"
                and line.get("status") == "running"
                and line["rollout_id"] not in done
            ),
            None,
        )

    genuine = eventually_sync(reported_running, "a rollout its server reported running")
    assert genuine is not None
    rollout_id, server_id = genuine["rollout_id"], genuine["server_id"]
    forged = export_request(
        otlp_record(
            ownership_attributes(rollout_id, "success", 2**63 - 1, server_id=server_id), time_ns=1
        ),
        otlp_record(
            ownership_attributes(rollout_id, "grading", 2**62, server_id=server_id),
            time_ns=7_258_118_400 * 10**9,  # 2200-01-01
        ),
        otlp_record(
            ownership_attributes(rollout_id, "cancelled", 2**61, server_id="another-server")
        ),
    )
    answer = httpx.post(
        f"http://127.0.0.1:{port}/v1/logs",
        content=forged.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
    )
    assert answer.status_code == 200, answer.text
    _, stderr = run.finish()
    assert run.returncode == 0, stderr
    assert [r["status"] for r in read_jsonl(folder / "index.jsonl")] == ["success"] * len(slow)
    lines = read_jsonl(folder / "transitions.jsonl")
    reported = [line for line in lines if line.get("source") == "server"]
    assert reported, "the demo server's own events are still taken"
    assert {line["server_id"] for line in reported} == {server_id}
    assert max(line["event_sequence"] for line in reported) < 2**61
    assert min(line["t"] for line in lines) >= 0
    track = [line["status"] for line in reported if line["rollout_id"] == rollout_id]
    assert "cancelled" not in track and track.count("running") == 1
