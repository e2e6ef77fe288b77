"""Ctrl-C in a headless eval: stop dispatching, cancel (or leave) what runs, keep what finished."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx

from tests.eval.runs.command import RunningEval, start_eval
from tests.eval.runs.files import multiply_rows, pending_items, read_jsonl, run_folder, write_jsonl
from tests.eval.runs.servers import ServedDemo, served_demo
from tests.polling import eventually_sync

FAST_ROWS = 4
SLOW_ROWS = 4


def start_and_wait_for_slow_rows(
    tmp_path: Path, server: ServedDemo, name: str, *flags: str
) -> tuple[RunningEval, Path, set[str]]:
    """An eval of fast rows then slow ones, two at a time, once both slots run slow rows;
    the ids of those two rollouts."""
    # The slow rows sleep before they call the model: one left running when the eval has gone
    # (and its model gateway with it) is still running, not failing on a model call.
    rows = [*multiply_rows(FAST_ROWS), *multiply_rows(SLOW_ROWS, metadata={"sleep": 20})]
    dataset = write_jsonl(tmp_path / "rows.jsonl", rows)
    folder = run_folder(tmp_path, name)
    running_eval = start_eval(
        *("--server", server.url, "--dataset-file", str(dataset), "--name", name),
        *("--max-in-flight", "2", *flags),
        cwd=tmp_path,
    )

    def slow_ones_running() -> set[str]:
        running = {
            t["rollout_id"]
            for t in read_jsonl(folder / "transitions.jsonl")
            if t["kind"] == "status" and t["status"] == "running" and t["row_index"] >= FAST_ROWS
        }
        return running if len(running) == 2 else set()

    try:
        running = eventually_sync(slow_ones_running, "two slow rows running")
    except BaseException:
        running_eval.send_signal(signal.SIGKILL)
        running_eval.finish()
        raise
    return running_eval, folder, running


def cancel_on_server(server: ServedDemo, ids: set[str]) -> dict[str, str]:
    response = httpx.post(f"{server.url}/rollout/cancel", json={"ids": sorted(ids)}, timeout=30)
    response.raise_for_status()
    dispositions: dict[str, str] = response.json()["dispositions"]
    return dispositions


def check_finished_rows_kept(folder: Path) -> None:
    events = read_jsonl(folder / "events.jsonl")
    assert sorted(e["row_index"] for e in events) == list(range(FAST_ROWS))
    index = read_jsonl(folder / "index.jsonl")
    assert [r["status"] for r in index] == ["success"] * FAST_ROWS
    assert pending_items(folder) == SLOW_ROWS


def test_ctrl_c_cancels_in_flight_rollouts_and_keeps_results(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    run, folder, running = start_and_wait_for_slow_rows(tmp_path, demo_server, "int")
    run.send_signal(signal.SIGINT)
    stdout, stderr = run.finish()
    assert run.returncode == 1, stderr
    assert "interrupted: no new rollouts; cancelling in-flight rollouts" in stderr
    assert "(interrupted)" in stdout
    check_finished_rows_kept(folder)
    transitions = read_jsonl(folder / "transitions.jsonl")
    cancelled = {
        t["rollout_id"] for t in transitions if t["kind"] == "status" and t["status"] == "cancelled"
    }
    assert cancelled == running, "the server reported both rollouts cancelled"
    requests = {
        t["rollout_id"]: t.get("disposition") for t in transitions if t["kind"] == "cancel_request"
    }
    assert requests == dict.fromkeys(running, "cancelled_running")
    # Nothing slow was started after the interrupt.
    started = {t["rollout_id"] for t in transitions if t.get("row_index", 0) >= FAST_ROWS}
    assert started == running


def test_ctrl_c_with_on_interrupt_leave_leaves_them_running(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    run, folder, running = start_and_wait_for_slow_rows(
        tmp_path, demo_server, "leave", "--on-interrupt", "leave"
    )
    run.send_signal(signal.SIGINT)
    _, stderr = run.finish()
    try:
        assert run.returncode == 1, stderr
        assert "interrupted: no new rollouts; leaving them" in stderr
        check_finished_rows_kept(folder)
        transitions = read_jsonl(folder / "transitions.jsonl")
        assert not [t for t in transitions if t["kind"] == "cancel_request"]
        assert not [t for t in transitions if t.get("status") == "cancelled"]
    finally:
        # Still running on the server after the eval ended; stopped here to free its slots.
        dispositions = cancel_on_server(demo_server, running)
    assert dispositions == dict.fromkeys(running, "cancelled_running")


def test_second_ctrl_c_exits_at_once(tmp_path: Path) -> None:
    with served_demo() as server:
        run, folder, _ = start_and_wait_for_slow_rows(tmp_path, server, "twice")
        # A frozen server: the first interrupt's cancel requests get no answer.
        server.process.send_signal(signal.SIGSTOP)
        try:
            run.send_signal(signal.SIGINT)
            eventually_sync(lambda: "interrupted:" in run.stderr(), "the first interrupt")
            run.send_signal(signal.SIGINT)
            _, stderr = run.finish()
        finally:
            server.process.send_signal(signal.SIGCONT)
    assert run.returncode == 1, stderr
    assert "second interrupt: exiting now" in stderr
    events = read_jsonl(folder / "events.jsonl")
    assert sorted(e["row_index"] for e in events) == list(range(FAST_ROWS))


def test_a_run_stopped_before_any_result_says_so_and_repeats_the_flags_as_typed(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    rows = multiply_rows(2, metadata={"sleep": 20})
    dataset = write_jsonl(tmp_path / "rows.jsonl", rows)
    folder = run_folder(tmp_path, "none")
    run = start_eval(
        *("--server", demo_server.url, "--dataset-file", str(dataset), "--name", "none"),
        *("--agent-timeout", "15", "--pass-threshold", "1"),
        cwd=tmp_path,
    )
    eventually_sync(
        lambda: [
            t
            for t in read_jsonl(folder / "transitions.jsonl")
            if t["kind"] == "status" and t["status"] == "running"
        ][1:],
        "both rows running",
    )
    run.send_signal(signal.SIGINT)
    stdout, stderr = run.finish()
    assert run.returncode == 1, stderr
    # No result: no rate (0.0 % would read as every sample failing).
    assert "│ Pass rate  │ - (no sample finished, threshold 1)" in stdout
    assert "0/0 samples" not in stdout
    # The resume hint repeats the flags as they were typed.
    assert "--agent-timeout 15 --pass-threshold 1" in stdout + stderr
    assert "15.0" not in stdout + stderr


def test_ctrl_c_leaving_a_model_call_in_flight_prints_no_traceback(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    # The row's model answer takes 30 s: at the interrupt its call is still in the gateway,
    # which stops with the run (uvicorn cancels what its graceful stop did not see end).
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(1, metadata={"stub": "slow:30"}))
    folder = run_folder(tmp_path, "leave")
    run = start_eval(
        *("--server", demo_server.url, "--dataset-file", str(dataset), "--name", "leave"),
        *("--on-interrupt", "leave"),
        cwd=tmp_path,
    )
    running = eventually_sync(
        lambda: [
            t["rollout_id"]
            for t in read_jsonl(folder / "transitions.jsonl")
            if t["kind"] == "status" and t["status"] == "running"
        ],
        "the row running",
    )
    run.send_signal(signal.SIGINT)
    _, stderr = run.finish()
    cancel_on_server(demo_server, set(running))
    assert run.returncode == 1, stderr
    # The call was in flight when the gateway stopped (else this test would prove nothing).
    (call,) = read_jsonl(folder / "calls.jsonl")
    assert call["rollout_id"] == running[0] and call["error"], call
    assert "Traceback" not in stderr, stderr
    assert "Exception in ASGI application" not in stderr, stderr
    assert len([line for line in stderr.splitlines() if "graceful shutdown" in line]) <= 1
