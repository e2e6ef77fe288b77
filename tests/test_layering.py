"""Import hygiene, with the real imports in a fresh interpreter (harlequin's way): what each
headless door loads (the dashboard's sources included), and that the lazy package doors still
resolve every public name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTTP_STACK = ("httpx", "httpcore", "aiohttp", "h11", "uvicorn", "starlette", "fastapi", "anyio")


def _modules(folder: str) -> list[str]:
    return sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in (ROOT / folder).rglob("*.py")
    )


def _loaded_after(imports: list[str]) -> set[str]:
    """The top-level names of every module loaded by importing `imports` in a new process."""
    script = (
        "import importlib, json, sys\n"
        f"for name in {imports!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    loaded: list[str] = json.loads(result.stdout)
    return set(loaded)


def _tops(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


@pytest.mark.parametrize("package", ["core", "server_stub", "tui/sources"])
def test_headless_packages_do_not_import_textual(package: str) -> None:
    modules = _modules(package)
    assert modules
    assert "textual" not in _tops(_loaded_after(modules))


def test_importing_server_stub_loads_neither_the_client_nor_aiohttp() -> None:
    loaded = _loaded_after(["server_stub"])
    assert "aiohttp" not in _tops(loaded)
    assert "core.client" not in loaded
    assert "core.handle" not in loaded


def test_a_server_without_ownership_events_never_loads_the_opentelemetry_sdk() -> None:
    # The SDK, its OTLP exporter, protobuf and requests cost start-up time: loaded only when the
    # feed is on. (FastAPI itself loads the OpenTelemetry API, which is not ours to avoid.)
    script = (
        "import asyncio, json, os, sys\n"
        "os.environ.pop('OSMOSIS_ROLLOUT_OTLP_ENDPOINT', None)\n"
        "from server_stub import LocalBackend, create_rollout_server\n"
        "from tests.server.plugins import Echo\n"
        "app = create_rollout_server(backend=LocalBackend(workflow=Echo))\n"
        "async def started_and_stopped():\n"
        "    async with app.router.lifespan_context(app):\n"
        "        pass\n"
        "asyncio.run(started_and_stopped())\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout))
    assert not {m for m in loaded if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))}
    assert not _tops(loaded) & {"google", "requests"}


def test_the_plug_in_api_loads_no_http_client() -> None:
    # What a rollout file imports: the workflow and grader classes.
    loaded = _loaded_after(["server_stub.workflow"])
    assert not _tops(loaded) & {"aiohttp", "httpx", "fastapi", "uvicorn"}
    assert "core.client" not in loaded


def test_the_results_modules_load_no_http_stack() -> None:
    modules = _modules("core/eval/results")
    assert len(modules) > 1
    leaked = _tops(_loaded_after(modules)) & set(HTTP_STACK)
    assert not leaked, f"the results modules pulled in {sorted(leaked)}"


@pytest.mark.parametrize("package", ["core", "server_stub", "core.eval"])
def test_the_package_door_is_lazy_and_every_public_name_resolves(package: str) -> None:
    script = (
        "import importlib, json, sys\n"
        f"door = importlib.import_module({package!r})\n"
        "before = sorted(sys.modules)\n"
        "missing = [name for name in door.__all__ if getattr(door, name, None) is None]\n"
        "print(json.dumps({'before': before, 'missing': missing}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["missing"] == []
    own = [m for m in answer["before"] if m.startswith(f"{package}.")]
    assert own == [], f"importing {package} loaded {own}"
    assert not _tops(set(answer["before"])) & set(HTTP_STACK)


def test_an_unknown_name_is_an_attribute_error() -> None:
    import core
    import core.eval
    import server_stub

    # The misspelt names are on purpose: mypy must reject them too (hence the ignores).
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = core.Nope  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = server_stub.Nope  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = core.eval.Nope  # type: ignore[attr-defined]
