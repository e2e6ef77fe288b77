"""`server_stub.http_limits` and `core.eval.http_limits` are one implementation kept in two
places (the layering lets neither part import the other): below their docstrings, the two
modules must be the same text, so a fix to one cannot miss the other."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TWINS = (ROOT / "server_stub" / "http_limits.py", ROOT / "core" / "eval" / "http_limits.py")


def below_the_docstring(path: Path) -> str:
    source = path.read_text()
    docstring = ast.parse(source).body[0]
    assert isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)
    assert docstring.end_lineno is not None
    return "".join(source.splitlines(keepends=True)[docstring.end_lineno :])


def test_the_two_http_limits_modules_are_the_same_below_their_docstrings() -> None:
    server, eval_services = (below_the_docstring(path) for path in TWINS)
    assert server == eval_services, (
        "edit server_stub/http_limits.py and core/eval/http_limits.py together"
    )
