"""`--events-port` (EVAL.md §6): where the eval's receiver of the servers' ownership events
listens."""

from __future__ import annotations

import socket
from pathlib import Path

from core.eval.servers.launcher import free_port
from tests.eval.runs.command import run_eval
from tests.eval.runs.files import read_jsonl, run_folder


def test_the_event_receiver_listens_where_it_is_told_and_the_demo_reports_to_it(
    tmp_path: Path,
) -> None:
    port = free_port()
    result = run_eval(
        *("--rows", "0-3", "--name", "fixed", "--json", "--events-port", str(port)), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    folder = run_folder(tmp_path, "fixed")
    assert f"event receiver on http://127.0.0.1:{port}" in (folder / "logs.txt").read_text()
    lines = read_jsonl(folder / "transitions.jsonl")
    assert {line["status"] for line in lines if line.get("source") == "server"} >= {
        "queued",
        "running",
        "success",
    }


def test_an_events_port_in_use_is_bad_input_naming_the_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_eval(
            *("--rows", "0-1", "--headless", "--name", "taken", "--events-port", str(port)),
            cwd=tmp_path,
        )
    assert result.returncode == 2, result.stderr
    assert str(port) in result.stderr and "event receiver" in result.stderr
    # The folder was open when the port was found taken: nothing ran, so it is removed again.
    assert not run_folder(tmp_path, "taken").exists()
