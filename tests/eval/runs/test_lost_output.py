"""Output nobody can take: a headless eval whose stdout reader goes away (`| head -3`) or whose
stdout is a full device goes on to the end, loses no result and exits as it would have."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.eval.runs.command import RUN_TIMEOUT_SEC, child_env, osmosis
from tests.eval.runs.files import multiply_rows, pending_items, read_jsonl, run_folder, write_jsonl
from tests.eval.runs.servers import ServedDemo
from tui.commands.std_streams import LOST_STDOUT

FAST_ROWS = 2
SLOW_ROWS = 6


def eval_command(tmp_path: Path, server: ServedDemo, name: str, *flags: str) -> list[str]:
    """A headless eval of fast rows, then rows that take a second each, two at a time: most
    of its lines come well after the first three."""
    rows = [*multiply_rows(FAST_ROWS), *multiply_rows(SLOW_ROWS, metadata={"sleep": 1})]
    dataset = write_jsonl(tmp_path / "rows.jsonl", rows)
    return osmosis(
        *flags,
        *("eval", "--headless", "--server", server.url, "--dataset-file", str(dataset)),
        *("--name", name, "--max-in-flight", "2"),
    )


def check_every_result_kept(folder: Path) -> None:
    index = read_jsonl(folder / "index.jsonl")
    assert [r["status"] for r in index] == ["success"] * (FAST_ROWS + SLOW_ROWS)
    assert len(read_jsonl(folder / "events.jsonl")) == FAST_ROWS + SLOW_ROWS
    assert pending_items(folder) == 0
    assert (folder / "metrics.json").is_file()


def check_no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "Exception ignored" not in stderr, stderr


def test_a_reader_that_goes_away_after_three_lines_neither_stops_nor_fails_the_run(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    stderr_path = tmp_path / "eval.err"
    with stderr_path.open("w") as stderr_file:
        process = subprocess.Popen(
            eval_command(tmp_path, demo_server, "head"),
            cwd=tmp_path,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
        )
        assert process.stdout is not None
        try:
            first = [process.stdout.readline() for _ in range(3)]  # `| head -3`
            process.stdout.close()
            code = process.wait(timeout=RUN_TIMEOUT_SEC)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    stderr = stderr_path.read_text()
    assert first[0].startswith(b"eval head: 8 work items to run"), first
    assert code == 0, stderr  # as if every line had been read
    check_no_traceback(stderr)
    assert LOST_STDOUT in stderr
    check_every_result_kept(run_folder(tmp_path, "head"))


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("mode", ["--json", "--plain"])
def test_stdout_on_a_full_device_neither_stops_nor_fails_the_run(
    tmp_path: Path, demo_server: ServedDemo, mode: str
) -> None:
    # --json writes stdout only at the end (the envelope), --plain from the first line on.
    name = mode.lstrip("-")
    with Path("/dev/full").open("w") as full:
        result = subprocess.run(
            eval_command(tmp_path, demo_server, name, mode),
            cwd=tmp_path,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=RUN_TIMEOUT_SEC,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    check_no_traceback(result.stderr)
    assert LOST_STDOUT in result.stderr
    check_every_result_kept(run_folder(tmp_path, name))
