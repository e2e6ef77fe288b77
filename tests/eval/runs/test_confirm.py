"""Before rollouts go to a real model, `osmosis-tui eval` asks (EVAL.md §2): only on a terminal,
only for a real model (not the stub), never with `-y`."""

from __future__ import annotations

import os
import pty
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from core.serving.loopback import serve_in_loop
from tests.eval.gateway.fake_upstream import FakeUpstream
from tests.eval.runs.command import RUN_TIMEOUT_SEC, child_env, osmosis, run_eval
from tests.eval.runs.files import envelope
from tests.eval.runs.servers import ServedDemo, threaded_server

CONFIG = "configs/eval/multiply.toml"
# With --chat-url, the rollouts go to that server, asked for the config's model by its name.
QUESTION = "Send 6 rollouts to model gpt-5-mini at {chat_url}? [y/N] "


def on_a_terminal(*args: str, cwd: Path, typed: bytes = b"") -> subprocess.CompletedProcess[str]:
    """`osmosis-tui eval args...` with a terminal (a pty) for its stdin, `typed` on it; its
    stdout and stderr are pipes, so it runs headless."""
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            osmosis("eval", *args),
            cwd=cwd,
            env=child_env(),
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(terminal)
        terminal = -1
        if typed:
            os.write(controller, typed)
        try:
            stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_SEC)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            pytest.fail(f"eval did not end (waiting for an answer?)\nstderr:\n{stderr}")
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@contextmanager
def real_model() -> Iterator[tuple[FakeUpstream, tuple[str, ...]]]:
    """An OpenAI-compatible model (not the stub), and the flags that make the run use it."""
    model = FakeUpstream()
    with threaded_server(lambda: serve_in_loop(model.app)) as url:
        yield model, ("--chat-url", f"{url}/v1")


def test_declining_on_a_terminal_starts_nothing(workspace: Path, demo_server: ServedDemo) -> None:
    with real_model() as (model, flags):
        result = on_a_terminal(
            CONFIG, "--server", demo_server.url, *flags, cwd=workspace, typed=b"n\n"
        )
    assert result.returncode == 0, result.stderr
    assert QUESTION.format(chat_url=flags[1]) in result.stderr
    assert "not started; nothing was written" in result.stderr
    assert result.stdout == ""
    assert model.requests == [], "not even the preflight"
    assert not (workspace / ".osmosis").exists()


def test_yes_on_a_terminal_runs(workspace: Path, demo_server: ServedDemo) -> None:
    with real_model() as (model, flags):
        result = on_a_terminal(
            CONFIG, "--server", demo_server.url, *flags, "--json", cwd=workspace, typed=b"y\n"
        )
    assert result.returncode == 0, result.stderr
    assert QUESTION.format(chat_url=flags[1]) in result.stderr
    assert envelope(result.stdout)["resource"]["succeeded"] == 6
    assert len(model.requests) == 1 + 6  # the preflight, then a call per rollout


def test_dash_y_skips_the_question(workspace: Path, demo_server: ServedDemo) -> None:
    with real_model() as (model, flags):
        result = on_a_terminal(CONFIG, "--server", demo_server.url, *flags, "-y", cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert "[y/N]" not in result.stderr
    assert len(model.requests) == 1 + 6


def test_off_a_terminal_nothing_is_asked(workspace: Path, demo_server: ServedDemo) -> None:
    with real_model() as (model, flags):
        result = run_eval(CONFIG, "--server", demo_server.url, *flags, cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert "[y/N]" not in result.stderr
    assert len(model.requests) == 1 + 6


def test_the_stub_model_is_never_asked_about(workspace: Path, demo_server: ServedDemo) -> None:
    result = on_a_terminal(CONFIG, "--server", demo_server.url, "--chat-url", "stub", cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert "[y/N]" not in result.stderr


def test_secrets_from_the_terminal_need_dash_y(workspace: Path, demo_server: ServedDemo) -> None:
    with real_model() as (model, flags):
        result = on_a_terminal(
            *(CONFIG, "--server", demo_server.url, *flags, "--secrets-file", "-"),
            cwd=workspace,
            typed=b"UNUSED=1\n\x04",  # a line, then end of input (Ctrl-D)
        )
    assert result.returncode == 2, result.stderr
    assert "--secrets-file - read the terminal's input" in result.stderr
    assert "add -y" in result.stderr
    assert model.requests == []
