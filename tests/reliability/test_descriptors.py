"""An eval asked for more rollouts in flight than it has file descriptors for (issue 15).

`--max-in-flight 100000` against a server that advertises no capacity: each rollout in flight
holds descriptors of the eval (its long poll, its model calls through the gateway), and the
process may open only so many (RLIMIT_NOFILE). The eval lowers the limit to what it can hold,
says so, and finishes; it never runs out and blames the server.
"""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

from core.serving.loopback import serve_in_loop
from tests.eval.runs.command import RUN_TIMEOUT_SEC, child_env, osmosis
from tests.eval.runs.files import multiply_rows, read_jsonl, run_folder, summary_of, write_jsonl
from tests.eval.runs.servers import threaded_server
from tests.reliability.counts import scaled
from tests.reliability.in_process import demo_app

NOFILE = 256
# More than the 48 in flight that 256 descriptors hold, so that the ceiling is what runs.
ROWS = scaled(120, 1000)


def at_most_nofile() -> None:
    """In the eval's process, before it starts: open at most NOFILE descriptors."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def test_a_max_in_flight_past_the_descriptor_limit_is_lowered_with_a_notice(
    tmp_path: Path,
) -> None:
    rows = ROWS
    dataset = write_jsonl(
        tmp_path / "rows.jsonl", multiply_rows(rows, metadata={"stub": "slow:0.5"})
    )
    # No capacity advertised (max_concurrent null): nothing but the eval itself caps it.
    with threaded_server(lambda: serve_in_loop(demo_app(max_concurrent=None))) as url:
        run = subprocess.run(
            osmosis(
                "eval",
                "--server",
                url,
                "--dataset-file",
                str(dataset),
                "--name",
                "fd",
                "--max-in-flight",
                "100000",
                "--json",
            ),
            cwd=tmp_path,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_SEC,
            stdin=subprocess.DEVNULL,
            preexec_fn=at_most_nofile,
            check=False,
        )
    assert run.returncode == 0, run.stderr
    summary = summary_of(run.stdout)
    assert summary["items"]["done"] == rows and summary["items"]["ok"] == rows, summary
    notice = next(line for line in run.stderr.splitlines() if "--max-in-flight 100000" in line)
    assert "lowered to" in notice and f"it may open {NOFILE} (RLIMIT_NOFILE" in notice
    assert "ulimit -n" in notice
    logs = (run_folder(tmp_path, "fd") / "logs.txt").read_text()
    assert "Too many open files" not in logs + run.stderr
    assert "down" not in run.stderr, "the server was never blamed"
    assert len(read_jsonl(run_folder(tmp_path, "fd") / "events.jsonl")) == rows
