"""What uv gets to build and run a workspace rollout (EVAL.md §5): an installed Python, this one
when it fits, never one downloaded; the user's own choices kept."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from core.eval.servers.uv_project import find_uv, uv_environment

INHERITED = {"PATH": "/usr/bin", "VIRTUAL_ENV": "/home/u/other-project/.venv", "HOME": "/home/u"}


def rollout(tmp_path: Path, requires_python: str | None = ">=3.10") -> Path:
    folder = tmp_path / "rollouts" / "r"
    folder.mkdir(parents=True)
    wanted = f'requires-python = "{requires_python}"\n' if requires_python else ""
    (folder / "pyproject.toml").write_text(f'[project]\nname = "r"\nversion = "0"\n{wanted}')
    return folder


def test_a_fresh_rollout_gets_this_interpreter_and_no_downloads(tmp_path: Path) -> None:
    env = uv_environment(rollout(tmp_path), INHERITED)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",  # inherited, except the activated environment: it is not the rollout's
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_PYTHON": sys.executable,
    }


def test_no_requires_python_lets_any_interpreter_fit(tmp_path: Path) -> None:
    assert uv_environment(rollout(tmp_path, None), {})["UV_PYTHON"] == sys.executable


@pytest.mark.parametrize("requires_python", [">=99", "<3", "not a specifier"])
def test_a_rollout_this_interpreter_does_not_fit_gets_an_installed_one_chosen_by_uv(
    tmp_path: Path, requires_python: str
) -> None:
    env = uv_environment(rollout(tmp_path, requires_python), INHERITED)
    assert "UV_PYTHON" not in env
    assert env["UV_PYTHON_DOWNLOADS"] == "never"


def test_an_existing_environment_is_not_replaced(tmp_path: Path) -> None:
    # A UV_PYTHON of another version would make `uv sync` delete and rebuild it.
    folder = rollout(tmp_path)
    (folder / ".venv").mkdir()
    (folder / ".venv" / "pyvenv.cfg").write_text("version_info = 3.12.1\n")
    assert "UV_PYTHON" not in uv_environment(folder, INHERITED)
    elsewhere = tmp_path / "envs" / "r"
    elsewhere.mkdir(parents=True)
    (elsewhere / "pyvenv.cfg").write_text("version_info = 3.12.1\n")
    (folder / ".venv" / "pyvenv.cfg").unlink()
    moved = uv_environment(folder, {"UV_PROJECT_ENVIRONMENT": str(elsewhere)})
    assert "UV_PYTHON" not in moved


@pytest.mark.parametrize("where", ["rollouts/r", "."])
def test_a_python_version_pin_is_left_to_uv(tmp_path: Path, where: str) -> None:
    folder = rollout(tmp_path)
    (tmp_path / where / ".python-version").write_text("3.12\n")
    assert "UV_PYTHON" not in uv_environment(folder, INHERITED)


def test_the_users_uv_settings_are_kept(tmp_path: Path) -> None:
    chosen = {"UV_PYTHON": "/opt/python3.13/bin/python3", "UV_PYTHON_DOWNLOADS": "automatic"}
    env = uv_environment(rollout(tmp_path), {**INHERITED, **chosen})
    assert {name: env[name] for name in chosen} == chosen


def test_uv_is_found_beside_this_interpreter_without_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # uv is a dependency of this project, so it is installed beside the interpreter running it.
    monkeypatch.setenv("PATH", "")
    assert find_uv() == str(Path(sys.executable).parent / "uv")
