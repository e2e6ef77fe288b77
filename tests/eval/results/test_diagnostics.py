"""Reading `rollout_trials/<id>/diagnostics.json`: the official Harbor backend's shape, and
a server's file read as untrusted (bounded, a regular file, only usable timings)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from core.eval.results.diagnostics import (
    MAX_DIAGNOSTICS_BYTES,
    MAX_TIMINGS,
    TrialDiagnostics,
    diagnostics_of,
    diagnostics_path,
    read_diagnostics,
)

#: What osmosis-ai 0.3.8's Harbor backend writes (`diagnostic_payload`), keys sorted.
HARBOR = {
    "backend": "harbor",
    "category": None,
    "harbor_exception_type": None,
    "phase": "verifier",
    "timings_sec": {
        "agent": 41.5,
        "agent_setup": 3.25,
        "environment_setup": 12.0,
        "total": 60.0,
        "verifier": 2.75,
    },
}


def write(folder: Path, document: Any) -> Path:
    path = diagnostics_path(folder, "rid")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def test_harbor_timings_are_read_in_the_order_its_phases_run(tmp_path: Path) -> None:
    assert diagnostics_path(tmp_path, "rid") == tmp_path / "rid" / "diagnostics.json"
    assert read_diagnostics(write(tmp_path, HARBOR)) == TrialDiagnostics(
        backend="harbor",
        phases=(
            ("environment_setup", 12.0),
            ("agent_setup", 3.25),
            ("agent", 41.5),
            ("verifier", 2.75),
        ),
        total=60.0,
    )


def test_other_names_follow_in_the_files_order_and_bad_values_are_left_out() -> None:
    document = {
        "timings_sec": {
            "fetch": 1,
            "agent": 2.0,
            "negative": -1.0,
            "text": "3",
            "flag": True,
            "nan": float("nan"),
            "ok\x1b[31m": 0.5,
        }
    }
    found = diagnostics_of(document)
    assert found is not None
    assert found.phases == (("agent", 2.0), ("fetch", 1.0), ("ok\ufffd[31m", 0.5))
    assert found.total is None and found.backend is None


def test_at_most_so_many_timings_are_taken() -> None:
    found = diagnostics_of({"timings_sec": {f"p{n}": 1.0 for n in range(100)}})
    assert found is not None and len(found.phases) == MAX_TIMINGS


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        "[1, 2]",
        json.dumps({"backend": "harbor"}),  # no timings
        json.dumps({"timings_sec": []}),
        json.dumps({"timings_sec": {"agent": "slow"}}),
        "[" * 10_000 + "]" * 10_000,  # nested too deeply
    ],
    ids=["text", "array", "no-timings", "timings-array", "no-number", "deep"],
)
def test_a_file_that_is_no_diagnostics_is_none(tmp_path: Path, document: str) -> None:
    assert read_diagnostics(write(tmp_path, document)) is None


def test_a_missing_a_too_large_or_a_symlinked_file_is_none(tmp_path: Path) -> None:
    assert read_diagnostics(diagnostics_path(tmp_path, "absent")) is None
    large = write(tmp_path, {"timings_sec": {"agent": 1.0}, "pad": "x" * MAX_DIAGNOSTICS_BYTES})
    assert read_diagnostics(large) is None
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(HARBOR))
    link = diagnostics_path(tmp_path, "linked")
    link.parent.mkdir()
    os.symlink(elsewhere, link)
    assert read_diagnostics(link) is None
