"""The headless packages never import Textual (DESIGN.md §1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _modules(package: str) -> list[str]:
    return sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in (ROOT / package).rglob("*.py")
    )


@pytest.mark.parametrize("package", ["core", "server_stub"])
def test_headless_packages_do_not_import_textual(package: str) -> None:
    modules = _modules(package)
    assert modules
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "leaked = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(leaked))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"{package} pulled in: {result.stdout.strip()}"
