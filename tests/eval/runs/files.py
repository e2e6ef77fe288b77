"""Datasets the acceptance tests write and the results files they read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def multiply_rows(count: int, **columns: Any) -> list[dict[str, Any]]:
    """Rows the demo workflow answers correctly; `columns` are added to every row."""
    return [
        {"user_prompt": f"What is {a} * 7?", "ground_truth": str(a * 7), **columns}
        for a in range(2, 2 + count)
    ]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a JSONL file (a line still being written is left out)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]


def envelope(stdout: str) -> dict[str, Any]:
    """The `--json` document on stdout: the official `eval.run` envelope."""
    document: dict[str, Any] = json.loads(stdout)
    assert document["operation"] == "eval.run", document
    return document


def summary_of(stdout: str) -> dict[str, Any]:
    """What only osmosis-tui reports, in the `--json` envelope."""
    ours: dict[str, Any] = envelope(stdout)["osmosis_tui"]
    return ours


def pending_items(folder: Path) -> int:
    """Work items of the run without a result: the planned total (`progress.json`) minus
    those in the index, which lists only items that have one (as official)."""
    total: int = json.loads((folder / "progress.json").read_text())["total_runs"]
    return total - len(read_jsonl(folder / "index.jsonl"))


def run_folder(cwd: Path, name: str) -> Path:
    return cwd / ".osmosis" / "evals" / name
