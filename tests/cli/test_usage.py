"""The `osmosis-tui` command line itself, run for real: `--version`, and what a mistake on the
command line prints (a short usage, what was probably meant, where the help is; exit 2)."""

from __future__ import annotations

import subprocess
from importlib.metadata import version
from pathlib import Path

from tests.eval_run.command import child_env, osmosis


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`osmosis-tui ARGS` in a subprocess, with no input."""
    return subprocess.run(
        osmosis(*args),
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_version_is_the_installed_distributions(tmp_path: Path) -> None:
    result = run("--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"osmosis-tui {version('osmosis-tui')}\n"
    assert result.stderr == ""


def test_a_mistake_prints_a_short_usage_and_where_the_help_is(tmp_path: Path) -> None:
    result = run("eval", "--n", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "usage: osmosis-tui eval [OPTIONS] [CONFIG]",
        "osmosis-tui eval: error: argument --n: expected one argument",
        "try 'osmosis-tui eval --help'",
    ]
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == [], "a mistake writes nothing"
