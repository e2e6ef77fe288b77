"""`osmosis-tui report` in a subprocess: where it writes the page, and what it says of input it
cannot use (exit status 2, naming the path)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.eval.runs.command import run_osmosis
from tui.commands import exit_codes


def test_the_page_goes_into_the_run_folder(hostile_folder: Path, tmp_path: Path) -> None:
    done = run_osmosis("report", str(hostile_folder), cwd=tmp_path)
    assert done.returncode == exit_codes.OK, done.stderr
    page = hostile_folder / "report.html"
    assert done.stdout.strip() == str(page)
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert stat.S_IMODE(page.stat().st_mode) == 0o600  # as every file of the run folder


def test_o_writes_it_elsewhere(demo_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "shared.html"
    done = run_osmosis("report", str(demo_folder), "-o", str(out), cwd=tmp_path)
    assert done.returncode == exit_codes.OK, done.stderr
    assert done.stdout.strip() == str(out)
    assert f"<h1>{demo_folder.name}</h1>" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", ["missing", "a file", "not a run", "empty"])
def test_what_is_no_run_folder_is_refused(case: str, tmp_path: Path) -> None:
    path = tmp_path / "run"
    if case == "a file":
        path.write_text("hello")
    elif case == "not a run":
        path.mkdir()
        (path / "notes.txt").write_text("nothing of a run")
    elif case == "empty":
        path.mkdir()
    done = run_osmosis("report", str(path), cwd=tmp_path)
    assert done.returncode == exit_codes.BAD_INPUT
    assert done.stderr.startswith(f"osmosis-tui report: {path}")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run" / "report.html").exists()


@pytest.mark.parametrize("case", ["no folder", "a folder"])
def test_an_output_it_cannot_write_is_refused(
    case: str, hostile_folder: Path, tmp_path: Path
) -> None:
    out = tmp_path / "gone" / "report.html" if case == "no folder" else tmp_path
    done = run_osmosis("report", str(hostile_folder), "-o", str(out), cwd=tmp_path)
    assert done.returncode == exit_codes.BAD_INPUT
    assert done.stderr.startswith(f"osmosis-tui report: {out}: cannot write the report")
    assert "Traceback" not in done.stderr


def test_help_says_what_it_writes(tmp_path: Path) -> None:
    done = run_osmosis("report", "--help", cwd=tmp_path)
    assert done.returncode == exit_codes.OK
    assert "self-contained HTML page" in done.stdout
    assert "RUN/report.html" in done.stdout
