"""`<output>/.locks/<name>.lock` (EVAL.md §7): one live run per name, across both tools."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.eval.results.lock import RunLock, RunLocked, lock_path
from tests.eval.results.helpers import file_mode

ROOT = Path(__file__).resolve().parents[3]

_HOLDER = """
import sys, time
from pathlib import Path
from core.eval.results.lock import RunLock
lock = RunLock.acquire(Path(sys.argv[1]), "busy")
print("held", flush=True)
sys.stdin.read()
"""


def test_the_lock_file_is_empty_private_and_kept(tmp_path: Path) -> None:
    with RunLock.acquire(tmp_path, "r1") as lock:
        assert lock.path == tmp_path / ".locks" / "r1.lock"
        assert file_mode(lock.path) == 0o600
    assert lock_path(tmp_path, "r1").read_bytes() == b""  # never deleted, never written
    RunLock.acquire(tmp_path, "r1").release()  # free again once released


def test_a_second_run_of_a_held_name_is_refused_naming_the_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"held\n"
        with pytest.raises(RunLocked) as caught:
            RunLock.acquire(tmp_path, "busy")
        message = str(caught.value)
        assert "'busy' is already running" in message
        assert str(tmp_path / ".locks" / "busy.lock") in message
        if Path("/proc/locks").exists():
            assert caught.value.holder == holder.pid
            assert f"(process {holder.pid})" in message
        RunLock.acquire(tmp_path, "other").release()  # other names are free
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()
    RunLock.acquire(tmp_path, "busy").release()  # the holder is gone
