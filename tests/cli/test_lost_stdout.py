"""A reader that went away (`osmosis-tui runs | head -2`): every command takes it the same way
as a headless eval does (tests/eval/runs/test_lost_output.py): no traceback, one note on
stderr, and the exit status the command would have had."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.eval.runs.command import child_env, osmosis
from tui.commands.std_streams import LOST_STDOUT


@pytest.mark.parametrize(
    "args",
    [
        ("runs",),
        ("runs", "--json"),
        ("--help",),
        ("eval", "--help"),
        ("--version",),
    ],
    ids=" ".join,
)
def test_a_command_whose_reader_is_gone_ends_with_a_note_and_its_own_status(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    # The reading end closed before the command writes: its first write fails, every time
    # (`| head` that has read its lines races with the writer; this does not).
    reading, writing = os.pipe()
    os.close(reading)
    try:
        result = subprocess.run(
            osmosis(*args),
            cwd=tmp_path,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=writing,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(writing)
    assert "Traceback" not in result.stderr, result.stderr
    assert "Exception ignored" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [f"{LOST_STDOUT} (Broken pipe)"]
    assert result.returncode == 0
