"""The `osmosis-tui` command line itself, run for real: `--version`, and what a mistake on the
command line prints (a short usage, what was probably meant, where the help is; exit 2)."""

from __future__ import annotations

import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.eval.runs.command import child_env, osmosis, run_osmosis


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`osmosis-tui ARGS` in a subprocess, with no input."""
    return run_osmosis(*args, cwd=cwd)


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


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        (
            ("eval", "--dataset-path", "rows.jsonl"),
            "unknown flag --dataset-path; did you mean --dataset?",
        ),
        (
            ("eval", "--max-inflight=3"),
            "unknown flag --max-inflight; did you mean --max-in-flight?",
        ),
        (("eval", "-rows", "1"), "unknown flag -rows; did you mean --rows?"),
        (
            ("serve", "--max-concurent", "3"),
            "unknown flag --max-concurent; did you mean --max-concurrent?",
        ),
        (("replay", "run", "--sped", "2"), "unknown flag --sped; did you mean --speed?"),
        (("--verison",), "unknown flag --verison; did you mean --version?"),
        (
            ("evl",),
            "invalid choice 'evl' (choose from eval, serve, replay, report, attach, runs, "
            "compare, watch); did you mean eval?",
        ),
        (("server", "--demo"), "did you mean serve?"),
        (("eval", "--on-interrupt", "cancle"), "did you mean cancel?"),
    ],
)
def test_a_mistyped_flag_or_command_is_answered_with_what_was_meant(
    tmp_path: Path, args: tuple[str, ...], answer: str
) -> None:
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 2
    usage, error, hint = result.stderr.splitlines()
    assert usage.startswith("usage: osmosis-tui")
    assert answer in error
    assert hint.startswith("try 'osmosis-tui") and hint.endswith(" --help'")
    assert list(tmp_path.iterdir()) == [], "a mistake writes nothing"


def test_an_unknown_flag_with_nothing_close_says_so(tmp_path: Path) -> None:
    result = run("eval", "--dry-run", cwd=tmp_path)
    assert result.returncode == 2
    assert "osmosis-tui eval: error: unknown flag --dry-run\n" in result.stderr
    extra = run("serve", "--demo", "surplus", cwd=tmp_path)
    assert extra.returncode == 2
    assert "osmosis-tui serve: error: unexpected argument 'surplus'\n" in extra.stderr


def help_lines(command: str, cwd: Path, **env: str) -> dict[str, str]:
    """`osmosis-tui COMMAND --help`, wide enough that no help is wrapped: the help of each
    flag (on its line, or the next one after a long flag), by the flag's first option string."""
    result = subprocess.run(
        osmosis(command, "--help"),
        cwd=cwd,
        env=child_env(COLUMNS="250", **env),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines: dict[str, str] = {}
    flag = None
    for line in result.stdout.splitlines():
        if line.startswith("  -"):
            flag = line.split()[0].rstrip(",")
            lines[flag] = line
        elif flag is not None and line.startswith("      "):
            lines[flag] += line
        else:
            flag = None
    assert "(default: None)" not in result.stdout
    assert "(default: False)" not in result.stdout
    assert "(default: [])" not in result.stdout
    return lines


@pytest.mark.parametrize(
    ("command", "defaults"),
    [
        (
            "serve",
            {
                "--host": "(default: 127.0.0.1)",
                "--port": "(default: $_OSMOSIS_ROLLOUT_PORT, else 8000)",
                "--api-key": "(default: $OSMOSIS_ROLLOUT_SERVER_API_KEY)",
                "--max-concurrent": "(default: 4)",
                "--max-pending": "(default: no limit)",
                "--result-wait": "(default: 30.0)",
                "--lease": "(default: 120.0)",
                "--retention": "(default: 900.0)",
            },
        ),
        (
            "eval",
            {
                "--name": "(default: <config or dataset name>-<local time>)",
                "-o": "(default: <workspace>/.osmosis/evals, or ./.osmosis/evals)",
                "--dataset-file": "(default: <workspace>/data/<experiment.dataset>.*)",
                "--rows": "(default: every row, or the first evaluation.limit)",
                "--max-in-flight": "(default: evaluation.batch_size, else the servers' capacity",
                "--server-api-key": "(default: $OSMOSIS_ROLLOUT_SERVER_API_KEY)",
                "--limit": "(default: evaluation.limit unless --rows, else every row)",
                "--n": "(default: evaluation.n, else 1)",
                "--agent-timeout": "(default: evaluation.agent_workflow_timeout_s, else none)",
                "--grader-timeout": "(default: evaluation.grader_timeout_s, else none)",
                "--pass-threshold": "(default: evaluation.pass_threshold, else 1.0)",
                "--stuck-after": "(default: 3x the phase's median duration, at least 30 s)",
                "--on-interrupt": "(default: cancel)",
            },
        ),
        ("replay", {"--speed": "(default: 1.0)"}),
    ],
)
def test_help_shows_each_flags_default(
    tmp_path: Path, command: str, defaults: dict[str, str]
) -> None:
    lines = help_lines(command, tmp_path)
    for flag, default in defaults.items():
        assert default in lines[flag], flag


def test_help_never_shows_a_key(tmp_path: Path) -> None:
    key = "srv-" + "9c1e" * 8
    for command in ("serve", "eval"):
        lines = help_lines(command, tmp_path, OSMOSIS_ROLLOUT_SERVER_API_KEY=key)
        assert not [line for line in lines.values() if key in line]
