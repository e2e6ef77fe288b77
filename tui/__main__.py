"""`python -m tui`: the `osmosis-tui` command for an interpreter whose venv has no console
script on PATH (e.g. the conformance venv, whose launched rollout servers must inherit it)."""

from __future__ import annotations

from tui.cli import main

if __name__ == "__main__":
    main()
