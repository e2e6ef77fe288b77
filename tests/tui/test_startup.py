"""While a workspace run starts (uv sync, the server's start, its health), the dashboard says
which step is in progress and its latest output line, in the header, and each step in the
event log: a real launch on the real uv, held at the server's start by a gate of the test's."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from core.eval import EvalRequest, prepare
from tests.eval.runs.command import rollout_pythonpath
from tests.tui.helpers import SIZE, log_lines, text_of, until
from tui.app import create_app
from tui.sources.live import LiveSource

WORKSPACE = Path(__file__).parents[1] / "eval" / "runs" / "workspace"
WARMING_UP = "warming up the model cache"

# An entrypoint that says something, then waits for the test's gate before serving.
GATED = f"""
import os, time
from pathlib import Path

print({WARMING_UP!r}, flush=True)
while not Path(os.environ["START_GATE"]).exists():
    time.sleep(0.05)
import main

main.main()
"""

CONFIG = """
[experiment]
rollout = "multiply"
entrypoint = "gated.py"
model_path = "openai/gpt-5-mini"
dataset = "multiply"

[evaluation]
limit = 1

[env]
WORKSPACE_GREETING = "hello"
START_GATE = "{gate}"
"""


def gated_workspace(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the workspace fixture whose server waits for a gate file; the config, and
    the gate."""
    workspace = tmp_path / "workspace"
    shutil.copytree(
        WORKSPACE, workspace, ignore=shutil.ignore_patterns("__pycache__", ".venv", "uv.lock")
    )
    (workspace / "rollouts" / "multiply" / "gated.py").write_text(textwrap.dedent(GATED))
    gate = tmp_path / "gate"
    config = workspace / "configs" / "eval" / "gated.toml"
    config.write_text(CONFIG.format(gate=gate))
    return config, gate


async def test_the_start_up_says_its_step_and_latest_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", rollout_pythonpath())  # the fixture rollout's imports
    config, gate = gated_workspace(tmp_path)
    plan = prepare(
        EvalRequest(config_path=config, chat_url="stub", output=tmp_path / "out", name="up")
    )

    def step(message: str) -> None:  # as `osmosis-tui eval` wires it (tui/commands/dashboard)
        app.call_later(app.log_event, message)

    source = LiveSource(plan, rerun="osmosis-tui eval", on_step=step)
    app = create_app(source, export_dir=tmp_path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            # Held at the server's start: the step, and the line the server printed last.
            await until(pilot, lambda: WARMING_UP in text_of(app.header), timeout=60)
            header = text_of(app.header)
            assert "◌ starting rollout server (gated.py) on port " in header
            assert "starting…" not in header
            logged = "\n".join(log_lines(app))
            assert "syncing rollout dependencies (multiply)" in logged
            assert "starting rollout server (gated.py) on port " in logged
            gate.touch()
            await until(pilot, lambda: "● 127.0.0.1:" in text_of(app.header), timeout=60)
            await until(
                pilot, lambda: "rollout server healthy on port" in "\n".join(log_lines(app))
            )
            assert WARMING_UP not in text_of(app.header)
    finally:
        gate.touch()
        await source.close()
