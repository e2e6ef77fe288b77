"""A workspace rollout as a uv project (EVAL.md §5): finding uv, the environment uv runs in,
and the command lines that sync the rollout's environment, read its osmosis-ai version and run
its entrypoint there. The launcher runs them; nothing here starts a process.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from core.eval.errors import InputError
from core.eval.plan.toml_source import parse_toml

# The osmosis-ai release this tool speaks for (PROTOCOL.md, EVAL.md): a rollout environment
# holding another one still runs, with a warning.
TESTED_OSMOSIS_AI = "0.3.8"

# Prints the rollout environment's osmosis-ai version, or nothing when it has none.
_VERSION_PROBE = (
    "import importlib.metadata as metadata\n"
    "try:\n"
    "    print(metadata.version('osmosis-ai'))\n"
    "except metadata.PackageNotFoundError:\n"
    "    pass\n"
)


def find_uv() -> str | None:
    """The `uv` installed with this interpreter (uv is a dependency of this project, so a fresh
    install has it there even when no environment is activated), else the one on PATH."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        found = shutil.which("uv", path=folder)
        if found is not None:
            return found
    return shutil.which("uv")


def sync_command(uv: str, rollout_dir: Path) -> list[str]:
    return [uv, "sync", "--project", str(rollout_dir)]


def server_command(uv: str, rollout_dir: Path, entrypoint: Path) -> list[str]:
    """`--no-sync`: the environment was synced just before, as its own step."""
    return [uv, "run", "--no-sync", "--project", str(rollout_dir), "python", str(entrypoint)]


def version_probe_command(uv: str, rollout_dir: Path) -> list[str]:
    return [uv, "run", "--no-sync", "--project", str(rollout_dir), "python", "-c", _VERSION_PROBE]


def uv_environment(rollout_dir: Path, inherited: Mapping[str, str]) -> dict[str, str]:
    """What uv runs with: `inherited` minus `VIRTUAL_ENV` (an activated environment is not
    the rollout's, and uv warns about it), never downloading a Python.

    Where uv would pick a Python itself (no `UV_PYTHON` given, no environment yet, no
    `.python-version` pin), it is given this interpreter when that satisfies the rollout's
    `requires-python`: a machine that can run this tool can then run the rollout, offline.
    Otherwise uv chooses among the installed ones. `UV_*` variables the user set are kept.
    """
    env = {name: value for name, value in inherited.items() if name != "VIRTUAL_ENV"}
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")
    if (
        "UV_PYTHON" not in env
        and not _has_environment(rollout_dir, env)
        and not _pins_python(rollout_dir)
        and _fits_this_python(rollout_dir / "pyproject.toml")
    ):
        env["UV_PYTHON"] = sys.executable
    return env


def _has_environment(rollout_dir: Path, env: Mapping[str, str]) -> bool:
    """Whether the project environment exists: uv keeps using it, and a `UV_PYTHON` of another
    version would make `uv sync` replace it."""
    where = env.get("UV_PROJECT_ENVIRONMENT")
    venv = rollout_dir / where if where else rollout_dir / ".venv"  # an absolute `where` wins
    return (venv / "pyvenv.cfg").is_file()


def _pins_python(rollout_dir: Path) -> bool:
    """A `.python-version(s)` file, which uv looks for in the project folder and above it."""
    return any(
        (folder / name).is_file()
        for folder in (rollout_dir, *rollout_dir.parents)
        for name in (".python-version", ".python-versions")
    )


def _fits_this_python(pyproject: Path) -> bool:
    """Whether this interpreter satisfies `project.requires-python` (none: any does). A file
    that cannot be read says nothing; `uv sync` reports what is wrong with it."""
    wanted = requires_python(pyproject)
    return wanted is not None and wanted.contains(platform.python_version(), prereleases=True)


def requires_python(pyproject: Path) -> SpecifierSet | None:
    """`project.requires-python` (an empty set when there is none); None when the file or
    the specifier cannot be read."""
    try:
        document = parse_toml(pyproject.read_text(encoding="utf-8"), str(pyproject))
        project = document.get("project", {})
        wanted = project.get("requires-python") if isinstance(project, dict) else None
        return SpecifierSet(wanted if isinstance(wanted, str) else "")
    except (OSError, UnicodeDecodeError, InputError, InvalidSpecifier):
        return None


def fitting_interpreter(
    rollout_dir: Path, inherited: Mapping[str, str]
) -> tuple[Version, str] | None:
    """An installed Python that satisfies the rollout's `requires-python`, the newest one, as
    `(version, path)`, for a `uv sync` that found none: this interpreter, or one of pyenv's
    (`$PYENV_ROOT/versions/<version>/`), which uv does not find when pyenv's shims only run
    the versions pyenv was told to (the shims fail, and uv passes them over).

    Read from the file system only: pyenv names a CPython's folder by its version."""
    wanted = requires_python(rollout_dir / "pyproject.toml")
    if wanted is None:
        return None
    found = [(Version(platform.python_version()), sys.executable)]
    pyenv = Path(inherited.get("PYENV_ROOT") or Path(inherited.get("HOME", "~")) / ".pyenv")
    try:
        folders = sorted(pyenv.expanduser().joinpath("versions").iterdir())
    except OSError:
        folders = []
    for folder in folders:
        python = folder / "bin" / "python3"
        try:
            version = Version(folder.name)
        except InvalidVersion:
            continue  # not a CPython by its version (a conda, a virtualenv)
        if python.is_file() and os.access(python, os.X_OK):
            found.append((version, str(python)))
    fitting = [(version, path) for version, path in found if wanted.contains(version, True)]
    return max(fitting, default=None)


__all__ = [
    "TESTED_OSMOSIS_AI",
    "find_uv",
    "fitting_interpreter",
    "requires_python",
    "server_command",
    "sync_command",
    "uv_environment",
    "version_probe_command",
]
