"""The parts table of docs/ARCHITECTURE.md, enforced on every import of the three packages."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGES = ("core", "server_stub", "tui")


@dataclass(frozen=True)
class Part:
    name: str
    where: tuple[str, ...]
    # part name -> the modules it is narrowed to (empty: the whole part)
    allowed: dict[str, tuple[str, ...]]
    everything: bool


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    importer: str
    imported: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def parse_parts(text: str) -> list[Part]:
    """The rows between the parts markers: | part | where | holds | may import |."""
    block = text.split("<!-- parts:begin -->", 1)[1].split("<!-- parts:end -->", 1)[0]
    parts: list[Part] = []
    for line in block.strip().splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        name, where, _holds, may = cells
        allowed: dict[str, tuple[str, ...]] = {}
        everything = may == "everything"
        if not everything and may not in ("—", "-", ""):
            for entry in re.findall(r"(\w+)(?:\s*\(([^)]*)\))?", may):
                modules = tuple(m.strip().strip("`") for m in entry[1].split(",") if m.strip())
                allowed[entry[0]] = modules
        parts.append(Part(name, tuple(re.findall(r"`([^`]+)`", where)), allowed, everything))
    return parts


def _specificity(pattern: str, rel: str) -> int:
    """How specifically `pattern` matches the file `rel` (0: no match)."""
    if pattern.endswith("/*.py"):
        folder = pattern[: -len("*.py")]
        rest = rel.removeprefix(folder)
        return len(folder) if rel.startswith(folder) and "/" not in rest else 0
    if pattern.endswith("/"):
        return len(pattern) if rel.startswith(pattern) else 0
    return len(pattern) + 1 if rel == pattern else 0


def part_of(rel: str, parts: list[Part]) -> Part | None:
    best = max(parts, key=lambda part: max(_specificity(p, rel) for p in part.where))
    return best if max(_specificity(p, rel) for p in best.where) else None


def module_file(module: str) -> str | None:
    """The repository path of a first-party module (a package is its __init__.py)."""
    base = ROOT.joinpath(*module.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py").relative_to(ROOT).as_posix()
    if (base / "__init__.py").is_file():
        return (base / "__init__.py").relative_to(ROOT).as_posix()
    return None


def module_name(rel: str) -> str:
    return rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def imported_modules(tree: ast.Module, importer: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) for every first-party import anywhere in the file."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = importer.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                # `from pkg import sub` imports the submodule when there is one.
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub if module_file(sub) else base))
    return [(line, m) for line, m in found if m.split(".")[0] in PACKAGES]


def check_source(rel: str, source: str, parts: list[Part]) -> list[Violation]:
    """The imports of the file `rel` (a repository path) holding `source` that cross the table."""
    importer = part_of(rel, parts)
    if importer is None:
        return [Violation(rel, 1, "?", "?", f"{rel} belongs to no part of the table")]
    tree = ast.parse(source, filename=rel)
    violations: list[Violation] = []
    name = module_name(rel)
    imports = imported_modules(tree, name, rel.endswith("__init__.py"))
    for line, module in sorted(set(imports)):
        target_rel = module_file(module)
        if target_rel is None:
            violations.append(Violation(rel, line, importer.name, module, f"unknown {module}"))
            continue
        target = part_of(target_rel, parts)
        if target is None or importer.everything or target.name == importer.name:
            continue
        narrowed = importer.allowed.get(target.name)
        if narrowed is None:
            message = f"{importer.name} may not import {target.name}: {module}"
        elif narrowed and module not in narrowed and module != target.name.lower():
            message = (
                f"{importer.name} may import only {', '.join(narrowed)} of {target.name}: {module}"
            )
        else:
            continue
        violations.append(Violation(rel, line, importer.name, module, message))
    return violations


def check_tree(parts: list[Part]) -> list[Violation]:
    return [
        violation
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for violation in check_source(
            path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"), parts
        )
    ]


@pytest.fixture(scope="module")
def parts() -> list[Part]:
    return parse_parts(TABLE.read_text(encoding="utf-8"))


def test_the_table_names_the_seven_parts_of_the_design(parts: list[Part]) -> None:
    assert [part.name for part in parts] == [
        "Protocol",
        "Serving",
        "Server",
        "Eval",
        "Embedded",
        "Screen",
        "Entry",
    ]


def test_every_import_follows_the_table(parts: list[Part]) -> None:
    violations = check_tree(parts)
    assert not violations, "imports the architecture does not allow:\n" + "\n".join(
        map(str, violations)
    )


def test_a_wrong_import_is_caught_with_its_file_and_line(parts: list[Part]) -> None:
    # A module of the Protocol part that reaches into the server, inside a function.
    source = "def f() -> None:\n    from server_stub.app import create_rollout_server\n"
    violations = check_source("core/probe.py", source, parts)
    assert [str(v) for v in violations] == [
        "core/probe.py:2: Protocol may not import Server: server_stub.app"
    ]


def test_the_server_may_import_only_the_types_the_lease_and_the_secret_forms(
    parts: list[Part],
) -> None:
    source = "from core.types import RolloutStatus\nfrom core import client\n"
    violations = check_source("server_stub/probe.py", source, parts)
    assert [str(v) for v in violations] == [
        "server_stub/probe.py:2: Server may import only core.types, core.lease, "
        "core.secret_forms of Protocol: core.client"
    ]


def test_relative_imports_and_submodules_are_resolved(parts: list[Part]) -> None:
    source = "from ..widgets import phase_track\nfrom . import dialogs\n"
    assert check_source("tui/screens/probe.py", source, parts) == []
    source = "from . import runner\nfrom .. import board\n"
    assert check_source("core/eval/probe.py", source, parts) == []
    violations = check_source("core/probe.py", "from .eval import session\n", parts)
    assert [str(v) for v in violations] == [
        "core/probe.py:1: Protocol may not import Eval: core.eval.session"
    ]


def test_a_file_outside_every_part_is_reported(parts: list[Part]) -> None:
    assert [str(v) for v in check_source("elsewhere/x.py", "", parts)] == [
        "elsewhere/x.py:1: elsewhere/x.py belongs to no part of the table"
    ]


def test_the_module_list_names_every_module_once() -> None:
    text = TABLE.read_text(encoding="utf-8")
    block = text.split("<!-- modules:begin -->", 1)[1].split("<!-- modules:end -->", 1)[0]
    listed = re.findall(r"^\| `([^`]+)` \|", block, flags=re.M)
    present = sorted(
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
    )
    assert sorted(listed) == sorted(set(listed)), "a module is listed twice"
    assert sorted(listed) == present, (
        f"missing from docs/ARCHITECTURE.md: {sorted(set(present) - set(listed))}; "
        f"listed but gone: {sorted(set(listed) - set(present))}"
    )


def test_serving_imports_nothing_of_ours(parts: list[Part]) -> None:
    source = "from core.types import RolloutStatus\nimport server_stub.app\n"
    violations = check_source("core/serving/probe.py", source, parts)
    assert [str(v) for v in violations] == [
        "core/serving/probe.py:1: Serving may not import Protocol: core.types",
        "core/serving/probe.py:2: Serving may not import Server: server_stub.app",
    ]


def test_the_server_and_the_eval_meet_only_through_embedded(parts: list[Part]) -> None:
    violations = check_source("server_stub/probe.py", "from core.eval import session\n", parts)
    assert [str(v) for v in violations] == [
        "server_stub/probe.py:1: Server may not import Eval: core.eval.session"
    ]
    violations = check_source("core/eval/gateway/probe.py", "import server_stub.llm\n", parts)
    assert [str(v) for v in violations] == [
        "core/eval/gateway/probe.py:1: Eval may not import Server: server_stub.llm"
    ]
    source = "import server_stub.llm\nfrom core.serving.loopback import bind_socket\n"
    assert check_source("core/eval/servers/embedded.py", source, parts) == []
    assert check_source("server_stub/probe.py", source.split("\n", 1)[1], parts) == []
