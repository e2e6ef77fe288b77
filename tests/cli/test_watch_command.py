"""`osmosis-tui watch` on the command line, run for real: what it refuses before its dashboard
opens (exit 2, naming the flag), and its help."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.eval.runs.command import run_osmosis


def test_its_help_names_the_setting_and_the_flags(tmp_path: Path) -> None:
    result = run_osmosis("watch", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert "OSMOSIS_ROLLOUT_OTLP_ENDPOINT" in said
    for flag in ("--events-port", "--server", "--previews", "--output", "--stuck-after"):
        assert flag in said
    assert "(default: 4318)" in said


def test_a_taken_events_port_is_refused_naming_the_flag(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_osmosis("watch", "--events-port", str(port), cwd=tmp_path)
    assert result.returncode == 2
    assert "--events-port" in result.stderr and f"127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_previews_folder_is_refused(tmp_path: Path) -> None:
    result = run_osmosis("watch", "--previews", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert result.returncode == 2
    assert f"--previews {tmp_path / 'nowhere'}: no such folder" in result.stderr


def test_an_output_that_cannot_be_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = run_osmosis("watch", "--events-port", "0", "-o", str(tmp_path / "file"), cwd=tmp_path)
    assert result.returncode == 2
    assert f"-o {tmp_path / 'file'}" in result.stderr
