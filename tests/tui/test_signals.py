"""The dashboard in a real pseudo-terminal, ended by a signal (issue 15): SIGTERM and SIGHUP (the
terminal closing) end it as `q` then "leave" would — the results written, exit 1 — never by
killing it where it stands with metrics.json and index.jsonl unwritten."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
from pathlib import Path

import pytest

from tests.eval.runs.command import child_env, osmosis
from tests.polling import eventually_sync

START_TIMEOUT_SEC = 60.0
END_TIMEOUT_SEC = 60.0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_dashboard_with_its_results_written(
    tmp_path: Path, signum: signal.Signals
) -> None:
    leader, follower = pty.openpty()
    os.set_blocking(leader, False)
    process = subprocess.Popen(
        osmosis("eval", "--name", "signalled"),
        cwd=tmp_path,
        env=child_env(TERM="xterm-256color", COLUMNS="120", LINES="40"),
        stdin=follower,
        stdout=follower,
        stderr=follower,
        start_new_session=True,  # its own terminal, as a shell gives it
    )
    os.close(follower)
    seen = bytearray()

    def drawn() -> bool:
        try:
            seen.extend(os.read(leader, 65536))
        except BlockingIOError:
            pass
        except OSError:  # EIO: every process holding the terminal has let go of it
            pass
        return b"osmosis-tui" in seen and (tmp_path / ".osmosis/evals/signalled").is_dir()

    try:
        eventually_sync(drawn, "the dashboard to draw", timeout=START_TIMEOUT_SEC)
        folder = tmp_path / ".osmosis/evals/signalled"
        eventually_sync(
            lambda: (
                (folder / "events.jsonl").exists() and bool((folder / "events.jsonl").read_text())
            ),
            "a first finished item",
            timeout=START_TIMEOUT_SEC,
        )
        process.send_signal(signum)
        if signum == signal.SIGHUP:
            os.close(leader)  # the terminal is gone too
        else:  # read on: a terminal nobody reads would block the app's writes
            eventually_sync(
                lambda: drawn() and process.poll() is not None,
                "the dashboard to end",
                timeout=END_TIMEOUT_SEC,
            )
        code = process.wait(timeout=END_TIMEOUT_SEC)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if signum != signal.SIGHUP:
            os.close(leader)
    assert code == 1
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["eval_run"]["status"] == "incomplete"
    journaled = (folder / "events.jsonl").read_text().splitlines()
    assert len((folder / "index.jsonl").read_text().splitlines()) == len(journaled)
