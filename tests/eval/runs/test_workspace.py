"""`osmosis-tui eval CONFIG.toml` launching the workspace's own rollout server (EVAL.md §5)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from core.serving.loopback import serve_in_loop
from tests.eval.runs.command import (
    REPO,
    alive,
    child_env,
    launched_process,
    processes_in,
    run_eval,
    server_pids,
    start_eval,
)
from tests.eval.runs.files import (
    envelope,
    multiply_rows,
    pending_items,
    read_jsonl,
    run_folder,
    write_jsonl,
)
from tests.eval.runs.servers import threaded_server
from tests.polling import eventually_sync

# The workspace's model_path is a real provider's: its rollouts talk to the stub model instead.
STUB = ("--chat-url", "stub")
CONFIG = "configs/eval/multiply.toml"


def check_launched_run(workspace: Path, result_stdout: str, name: str) -> None:
    document = envelope(result_stdout)
    resource = document["resource"]
    assert document["status"] == "success"
    assert resource["total_work_items"] == resource["succeeded"] == resource["dispatched"] == 6
    assert resource["metrics"]["pass_rate"] == 1.0
    assert resource["workspace_directory"] == str(workspace.resolve())
    folder = run_folder(workspace, name)
    assert resource["output_path"] == str(folder.resolve())
    logs = (folder / "logs.txt").read_text()
    pids = server_pids(logs)
    try:
        assert len(pids) == 1, logs
        # The config's [env] reached the child, and its output reached logs.txt.
        assert "hello from the config's env" in logs
        events = read_jsonl(folder / "events.jsonl")
        for event in events:
            assert f"rollout {event['rollout_id']} answered" in logs
            # _OSMOSIS_ROLLOUT_ARTIFACT_ROOT is <run>/rollout_trials, wherever the child runs.
            answer = folder / "rollout_trials" / event["rollout_id"] / "artifacts" / "answer.txt"
            assert answer.is_file()
        assert not alive(pids[0]), "the rollout server was stopped"
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_workspace_rollout_server_is_launched_used_and_stopped(workspace: Path) -> None:
    # Started inside the workspace, not at its root: every path is the root's all the same.
    inside = workspace / "rollouts" / "multiply"
    result = run_eval(f"../../{CONFIG}", *STUB, "--headless", "--json", "--name", "ws", cwd=inside)
    assert result.returncode == 0, result.stderr
    check_launched_run(workspace, result.stdout, "ws")
    assert not (inside / ".osmosis").exists()


def test_the_server_starts_while_the_preflight_is_out_and_stops_when_it_fails(
    workspace: Path,
) -> None:
    # A model that answers the preflight only once the server is healthy (at most 60 s),
    # and refuses the key: a launch that waited for the preflight would never see it.
    logs = run_folder(workspace, "refused") / "logs.txt"
    seen_healthy: list[bool] = []
    launched: list[int] = []  # read now: the refused run's folder is removed at its end

    async def refuse(request: Request) -> JSONResponse:
        for _ in range(1200):
            if logs.is_file() and "rollout server healthy" in logs.read_text():
                break
            await asyncio.sleep(0.05)
        seen_healthy.append("rollout server healthy" in logs.read_text())
        launched.extend(server_pids(logs.read_text()))
        return JSONResponse({"error": {"message": "invalid api key"}}, status_code=401)

    model = Starlette(routes=[Route("/v1/chat/completions", refuse, methods=["POST"])])
    with threaded_server(lambda: serve_in_loop(model)) as url:
        result = run_eval(
            CONFIG, "--chat-url", f"{url}/v1", "--headless", "--name", "refused", cwd=workspace
        )
    assert result.returncode == 2, result.stderr
    assert "model preflight for 'openai/gpt-5-mini' failed (HTTP 401)" in result.stderr
    assert seen_healthy == [True]
    (pid,) = launched
    assert not alive(pid), "the server launched meanwhile was stopped"
    assert not run_folder(workspace, "refused").exists(), "nothing ran: no folder is left"


def test_the_server_runs_in_the_rollouts_uv_environment_with_what_the_launcher_gives_it(
    workspace: Path,
) -> None:
    config = workspace / "configs" / "eval" / "multiply.toml"
    config.write_text(config.read_text() + '\n[secrets]\nrequired = ["WORKSPACE_TOKEN"]\n')
    record = workspace / "launch.json"
    env = child_env(
        LAUNCH_RECORD=str(record),
        WORKSPACE_TOKEN="token-from-the-environment",
        VIRTUAL_ENV=str(workspace / "some-other-venv"),  # an activated one: not the rollout's
    )
    result = run_eval(
        "configs/eval/multiply.toml",
        "--headless",
        "--json",
        "--name",
        "env",
        cwd=workspace,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    launched = json.loads(record.read_text())
    folder = (workspace / "rollouts" / "multiply").resolve()
    run = run_folder(workspace, "env").resolve()
    child = launched["env"]
    uv = str(Path(sys.executable).parent / "uv")  # installed with this project, beside Python
    assert launched["parent_argv"] == [
        *(uv, "run", "--no-sync", "--project", str(folder)),
        *("python", str(folder / "main.py")),
    ]
    # The lifeline's guard started `uv run` and leads the group of all three.
    guard = [sys.executable, "-I", str(REPO / "core" / "eval" / "servers" / "lifeline.py")]
    assert launched["grandparent_argv"][:3] == guard
    assert launched["grandparent_argv"][5:] == launched["parent_argv"]
    assert launched["pgid"] == launched["parent_ppid"] != os.getpgid(0), "the guard leads"
    assert launched["argv"] == [str(folder / "main.py")]
    assert launched["cwd"] == str(folder)
    assert Path(launched["executable"]).parent == folder / ".venv" / "bin"
    assert child["VIRTUAL_ENV"] == str(folder / ".venv"), "set by uv run, not inherited"
    assert child["WORKSPACE_GREETING"] == "hello from the config's env"  # [env]
    assert child["WORKSPACE_TOKEN"] == "token-from-the-environment"  # [secrets]
    assert child["_OSMOSIS_ROLLOUT_ARTIFACT_ROOT"] == str(run / "rollout_trials")
    assert re.fullmatch(r"[0-9a-f]{32}", child["_OSMOSIS_ROLLOUT_INSTANCE_ID"])
    assert child["PYTHONUNBUFFERED"] == "1"
    assert (child["UV_PYTHON_DOWNLOADS"], child["UV_PYTHON"]) == ("never", sys.executable)
    logs = (run / "logs.txt").read_text()
    assert f"[server] rollout server healthy on port {child['_OSMOSIS_ROLLOUT_PORT']}\n" in logs
    assert "[deps] syncing rollout dependencies (multiply)\n" in logs
    assert f"[rollout-server] workspace server pid {launched['pid']} stopped by SIGTERM" in logs
    assert not alive(launched["pid"]) and not alive(launched["ppid"]), "nothing left running"
    assert not alive(launched["parent_ppid"]), "the guard is gone too"


def test_a_rollout_folder_without_pyproject_toml_is_refused_before_anything_starts(
    workspace: Path,
) -> None:
    (workspace / "rollouts" / "multiply" / "pyproject.toml").unlink()
    result = run_eval("configs/eval/multiply.toml", "--headless", cwd=workspace)
    assert result.returncode == 2
    assert (
        "experiment.entrypoint: rollouts/multiply/pyproject.toml not found: the rollout server "
        "runs in the environment uv builds from it (uv sync --project rollouts/multiply)"
    ) in result.stderr
    assert not (workspace / ".osmosis").exists()


def test_entrypoint_reaching_outside_its_rollout_folder_is_refused(workspace: Path) -> None:
    outside = workspace / "outside.py"
    outside.write_text("raise SystemExit('must never run')\n")
    entrypoint = workspace / "rollouts" / "multiply" / "main.py"
    entrypoint.unlink()
    entrypoint.symlink_to(outside)
    result = run_eval(CONFIG, "--headless", cwd=workspace)
    assert result.returncode == 2
    assert "experiment.entrypoint: rollout 'multiply' / entrypoint 'main.py' leave" in result.stderr
    assert not (workspace / ".osmosis").exists()


def test_entrypoint_that_exits_at_once_is_a_clear_error(workspace: Path) -> None:
    entrypoint = workspace / "rollouts" / "multiply" / "main.py"
    entrypoint.write_text(
        "print('cannot start: no model configured', flush=True)\nraise SystemExit(3)\n"
    )
    result = run_eval(CONFIG, *STUB, "--headless", "--name", "gone", cwd=workspace)
    assert result.returncode == 1
    assert (
        "the rollout server exited with status 3 before it was healthy: "
        "cannot start: no model configured; its output is in logs.txt"
    ) in result.stdout
    folder = run_folder(workspace, "gone")
    assert "cannot start: no model configured" in (folder / "logs.txt").read_text()
    assert read_jsonl(folder / "index.jsonl") == []
    assert pending_items(folder) == 6


def test_ctrl_c_while_the_workspace_server_starts_stops_it(workspace: Path) -> None:
    entrypoint = workspace / "rollouts" / "multiply" / "main.py"
    entrypoint.write_text(
        "import os, time\n"
        "print(f'slow server pid {os.getpid()}: warming up', flush=True)\n"
        "time.sleep(120)\n"
    )
    run = start_eval(CONFIG, *STUB, "--name", "early", cwd=workspace)
    logs = run_folder(workspace, "early") / "logs.txt"
    pids = eventually_sync(
        lambda: server_pids(logs.read_text()) if logs.exists() else [], "the server pid"
    )
    try:
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.finish()
        assert run.returncode == 1, stderr
        assert "(interrupted)" in stdout
        assert not alive(pids[0]), "the half-started server was stopped"
    finally:
        if alive(pids[0]):
            os.kill(pids[0], signal.SIGKILL)


def server_running_a_row(folder: Path) -> list[int]:
    """The launched server's pid once a row runs there (none before)."""
    statuses = read_jsonl(folder / "transitions.jsonl")
    if not any(t.get("status") == "running" for t in statuses):
        return []
    return server_pids((folder / "logs.txt").read_text())


def test_second_ctrl_c_does_not_leave_the_workspace_server_running(workspace: Path) -> None:
    dataset = write_jsonl(workspace / "slow.jsonl", multiply_rows(2, metadata={"sleep": 60}))
    run = start_eval(
        *(CONFIG, *STUB, "--dataset-file", str(dataset), "--name", "hard"),
        cwd=workspace,
    )
    folder = run_folder(workspace, "hard")
    pids = eventually_sync(
        lambda: server_running_a_row(folder), "a row running on the workspace server"
    )
    try:
        # Frozen, the server answers no cancel: the first interrupt is still waiting when
        # the second comes, and SIGKILL is the only way to stop it.
        os.kill(pids[0], signal.SIGSTOP)
        run.send_signal(signal.SIGINT)
        eventually_sync(lambda: "interrupted:" in run.stderr(), "the first interrupt")
        run.send_signal(signal.SIGINT)
        _, stderr = run.finish()
        assert run.returncode == 1, stderr
        assert "second interrupt: exiting now" in stderr
        eventually_sync(lambda: not alive(pids[0]), "the workspace server to be gone")
    finally:
        if alive(pids[0]):
            os.kill(pids[0], signal.SIGKILL)


def kill_what_is_left(pids: list[int]) -> None:
    """SIGKILL what a test's eval left running (after a failed check: nothing else is)."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def running_rollouts(folder: Path) -> set[str]:
    """The rollouts of the run seen running so far (a resumed run adds its own)."""
    return {
        t["rollout_id"]
        for t in read_jsonl(folder / "transitions.jsonl")
        if t.get("status") == "running"
    }


def sigkill_while_a_row_runs(
    workspace: Path, dataset: Path, servers_started: int, *, killed_first: str | None = None
) -> None:
    """Start (or resume) the run, SIGKILL it once a row runs on the `servers_started`-th
    launched server (after its `killed_first`, `uv run` or `guard`, if given), and check that
    every process of that launch goes with it."""
    rollout = (workspace / "rollouts" / "multiply").resolve()
    folder = run_folder(workspace, "killed")
    ran_before = running_rollouts(folder)
    run = start_eval(
        *(CONFIG, *STUB, "--dataset-file", str(dataset), "--name", "killed"),
        cwd=workspace,
    )
    eventually_sync(
        lambda: (
            running_rollouts(folder) - ran_before
            and len(server_pids((folder / "logs.txt").read_text())) == servers_started
        ),
        "a row running on this attempt's workspace server",
    )
    launched = processes_in(rollout)  # `uv run`, the server, and whatever else runs there
    try:
        if killed_first is not None:
            first = launched_process(launched, killed_first)
            os.kill(first, signal.SIGKILL)
            # Its end seen where it is watched: `uv run` reaped by the guard; the guard's by
            # the eval, which says so.
            eventually_sync(lambda: not Path(f"/proc/{first}").exists(), f"{killed_first} reaped")
            if killed_first == "guard":
                eventually_sync(
                    lambda: "its guard process ended" in (folder / "logs.txt").read_text(),
                    "the eval to notice its guard's end",
                )
        run.send_signal(signal.SIGKILL)
        run.finish()
        eventually_sync(
            lambda: not [pid for pid in launched if alive(pid)],
            "every process of the launched server to be gone",
        )
        assert processes_in(rollout) == []
    finally:
        kill_what_is_left(launched)


def test_sigkill_of_the_eval_takes_the_workspace_server_with_it(workspace: Path) -> None:
    dataset = write_jsonl(workspace / "slow.jsonl", multiply_rows(2, metadata={"sleep": 60}))
    sigkill_while_a_row_runs(workspace, dataset, servers_started=1)
    # Resumed and killed again: never one more server left per kill.
    sigkill_while_a_row_runs(workspace, dataset, servers_started=2)


@pytest.mark.parametrize("first", ["uv run", "guard"])
def test_sigkill_of_the_eval_takes_the_server_with_it_after_its_uv_run_or_guard_was_killed(
    workspace: Path, first: str
) -> None:
    """A SIGKILLed `uv run` leaves its server serving, and the guard guards it still; a
    SIGKILLed guard is taken for the server's end. (Before, either left the server serving
    after the eval's SIGKILL.)"""
    dataset = write_jsonl(workspace / "slow.jsonl", multiply_rows(2, metadata={"sleep": 60}))
    sigkill_while_a_row_runs(workspace, dataset, servers_started=1, killed_first=first)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_the_run_gracefully_with_the_workspace_server(
    workspace: Path, signum: signal.Signals
) -> None:
    # Closing the terminal (SIGHUP) is an interrupt like SIGTERM: results written, exit 1.
    fast, slow = multiply_rows(2), multiply_rows(1, metadata={"sleep": 60})
    dataset = write_jsonl(workspace / "rows.jsonl", [*fast, *slow])
    rollout = (workspace / "rollouts" / "multiply").resolve()
    run = start_eval(
        *(CONFIG, *STUB, "--dataset-file", str(dataset), "--name", "hup"), cwd=workspace
    )
    folder = run_folder(workspace, "hup")

    def fast_rows_done_slow_one_running() -> bool:
        running = {
            t["row_index"]
            for t in read_jsonl(folder / "transitions.jsonl")
            if t.get("status") == "running"
        }
        return len(read_jsonl(folder / "events.jsonl")) == 2 and 2 in running

    eventually_sync(fast_rows_done_slow_one_running, "2 rows done and the slow one running")
    launched = processes_in(rollout)
    try:
        run.send_signal(signum)
        stdout, stderr = run.finish()
        assert run.returncode == 1, stderr
        assert "interrupted: no new rollouts; cancelling in-flight rollouts" in stderr
        assert "(interrupted)" in stdout
        assert [r["status"] for r in read_jsonl(folder / "index.jsonl")] == ["success"] * 2
        assert pending_items(folder) == 1
        assert (folder / "metrics.json").is_file()
        logs = (folder / "logs.txt").read_text()
        assert "stopped by SIGTERM" in logs, "the launched server was stopped gracefully"
        eventually_sync(
            lambda: not [pid for pid in launched if alive(pid)], "the launched server to be gone"
        )
    finally:
        kill_what_is_left(launched)


@pytest.mark.conformance
def test_workspace_on_the_official_rollout_server(workspace: Path, official_python: Path) -> None:
    # The whole command runs on the conformance venv's interpreter, so the entrypoint it
    # launches (with the current interpreter) has the official osmosis_ai package.
    result = run_eval(
        "configs/eval/official.toml",
        *STUB,
        "--headless",
        "--json",
        "--name",
        "official",
        cwd=workspace,
        python=official_python,
    )
    assert result.returncode == 0, result.stderr
    check_launched_run(workspace, result.stdout, "official")
