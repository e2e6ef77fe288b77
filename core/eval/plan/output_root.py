"""Where a run's results go and where the commands that read runs look for them: the results
root (`-o`, default `.osmosis/evals`), taken from the workspace's root inside a workspace.

Apart from `prepare` so that `runs`, `attach` and `compare` find the root without loading
what a run needs (the gateway, LiteLLM): this module imports only the config's workspace
lookup.
"""

from __future__ import annotations

from pathlib import Path

from core.eval.plan.config import enclosing_workspace

DEFAULT_OUTPUT = Path(".osmosis/evals")


def results_root(output: Path | None, *, at: Path) -> Path:
    """The results root `-o output` (None: the default) names for a command run in the folder
    `at` that reads runs rather than making one (`runs`, `attach`, `compare`): inside a
    workspace, taken from its root, as a run of one of its configs takes it, wherever in it
    the command runs."""
    given = output or DEFAULT_OUTPUT
    workspace = enclosing_workspace(at)
    return given if workspace is None else located(given, workspace)


def located(path: Path, root: Path) -> Path:
    """`path` taken from `root` when relative, as messages show it."""
    return near(path if path.is_absolute() else root / path)


def near(path: Path) -> Path:
    """`path` (absolute) as messages show it: from the current directory when it is inside it."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


__all__ = ["DEFAULT_OUTPUT", "located", "near", "results_root"]
