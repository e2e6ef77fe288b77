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


TOKEN = "cli-token-0123456789abcdef"


def test_beyond_loopback_without_a_token_it_refuses_to_start(tmp_path: Path) -> None:
    for address in ("0.0.0.0:0", "[::]:0", "watch-host.example:4318"):
        result = run_osmosis("watch", "--events-listen", address, cwd=tmp_path)
        assert result.returncode == 2, address
        assert "--events-listen" in result.stderr and "--events-token-file" in result.stderr


def test_an_unusable_token_is_refused_naming_its_flag(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    result = run_osmosis(
        "watch", "--events-listen", "0.0.0.0:0", "--events-token-file", str(empty), cwd=tmp_path
    )
    assert result.returncode == 2
    assert f"--events-token-file {empty}: the token must be" in result.stderr
    missing = tmp_path / "missing"
    result = run_osmosis("watch", "--events-token-file", str(missing), cwd=tmp_path)
    assert result.returncode == 2 and f"--events-token-file {missing}: cannot read" in result.stderr
    result = run_osmosis("watch", "--events-token", "two words", cwd=tmp_path)
    assert result.returncode == 2 and "--events-token: the token must be" in result.stderr


def test_the_token_is_never_said(tmp_path: Path) -> None:
    # Refused after the token was read (its address is taken): nothing it says names it.
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.2", 0))
        taken.listen()
        address = f"127.0.0.2:{taken.getsockname()[1]}"
        for flags in (["--events-token-file", str(token_file)], ["--events-token", TOKEN]):
            result = run_osmosis("watch", "--events-listen", address, *flags, cwd=tmp_path)
            assert result.returncode == 2
            assert "--events-listen" in result.stderr and address in result.stderr
            assert TOKEN not in result.stdout + result.stderr
