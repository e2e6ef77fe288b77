"""`manifest.json` (EVAL.md §8): the resume lock's keys and value formats, as official."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from core.eval.results.manifest import (
    ManifestError,
    changed_input_keys,
    count_selected_rows,
    format_row_selector,
    manifest_inputs,
    new_manifest,
    read_manifest,
    work_item_count,
)
from tests.eval.results.helpers import official_inputs

ISO_MICROS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def our_inputs(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "model_path": "openai/stub-model",
        "dataset_sha256": "e2d2a94a26b588e65e42002e409db592903717a4e77a6b997013ddef1af02409",
        "selected_source_rows": [4, 0, 1, 2, 3],
        "n": 1,
        "rollout_name": "demo",
        "entrypoint": "main.py",
        "source_digest": "8a2abcc7099e41ef3a0d42d706a84dea5820948d52f6995bbae5baf722678659",
        "env": {"DEMO_SLOW_SEC": "3"},
        "secret_names": (),
        "agent_timeout_sec": 60,
        "grader_timeout_sec": 30,
    }
    values.update(changes)
    return manifest_inputs(**values)


def test_inputs_are_the_official_ones_key_for_key_and_in_order() -> None:
    inputs = our_inputs()
    assert inputs == official_inputs()
    # Byte for byte as the official manifest holds them, key order and float forms included.
    assert json.dumps(inputs) == json.dumps(official_inputs())
    assert type(inputs["timeouts"]["agent_timeout_sec"]) is float


def test_env_and_secret_names_are_sorted_and_a_missing_timeout_is_null() -> None:
    inputs = our_inputs(
        env={"B": "2", "A": "1"}, secret_names=("Z_KEY", "A_KEY"), grader_timeout_sec=None
    )
    assert list(inputs["env"]) == ["A", "B"]
    assert inputs["secret_names"] == ["A_KEY", "Z_KEY"]
    assert inputs["timeouts"] == {"agent_timeout_sec": 60.0, "grader_timeout_sec": None}


@pytest.mark.parametrize(
    ("rows", "selector"),
    [([0, 1, 2, 3, 4], "0-4"), ([5, 1, 2, 4], "1-2,4-5"), ([0], "0"), ([3, 3, 9, 7], "3,7,9")],
)
def test_row_selector_is_compact_sorted_and_deduplicated(rows: list[int], selector: str) -> None:
    assert format_row_selector(rows) == selector


def test_changed_keys_are_the_top_level_ones_sorted() -> None:
    stored = official_inputs()
    current = official_inputs(
        n=2,
        dataset={**stored["dataset"], "selected_source_rows": "0-2"},
        timeouts={"agent_timeout_sec": 60, "grader_timeout_sec": 30},  # 60 == 60.0: same
        extra=1,
    )
    del current["env"]
    assert changed_input_keys(stored, current) == ["dataset", "env", "extra", "n"]
    assert changed_input_keys(stored, official_inputs()) == []


def test_a_new_manifest_has_the_official_keys_and_formats() -> None:
    manifest = new_manifest("r1", official_inputs(), {"sdk_version": "0.3.8"})
    assert list(manifest) == [
        "schema_version",
        "local_run_id",
        "run_name",
        "created_at",
        "inputs",
        "provenance",
    ]
    assert manifest["schema_version"] == 1
    assert re.fullmatch(r"[0-9a-f]{32}", manifest["local_run_id"])
    assert ISO_MICROS.fullmatch(manifest["created_at"])
    datetime.fromisoformat(manifest["created_at"].replace("Z", "+00:00"))
    assert new_manifest("r1", {}, {})["local_run_id"] != manifest["local_run_id"]


def test_an_official_manifest_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    official = new_manifest("r1", official_inputs(), {"sdk_version": "0.3.8", "git_dirty": False})
    path.write_text(json.dumps(official, indent=2) + "\n")
    assert read_manifest(path) == official


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        '{"schema_version": 2, "inputs": {}}',
        '{"schema_version": 1}',
        '{"schema_version": 1, "inputs": {}, "run_name": "r", "created_at": "x"}',
        pytest.param("[" * 100_000, id="too-deep-to-parse"),  # a RecursionError before
    ],
)
def test_a_manifest_that_is_not_one_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(text)
    with pytest.raises(ManifestError):
        read_manifest(path)


@pytest.mark.parametrize(
    ("selector", "rows"), [("0-4", 5), ("1-2,4-5", 4), ("0", 1), ("3,7,9", 3), ("5-2", None)]
)
def test_a_selector_says_how_many_rows_it_selects(selector: str, rows: int | None) -> None:
    assert count_selected_rows(selector) == rows
    for bad in ("", "a", "1-", "-3", "1,,2"):
        assert count_selected_rows(bad) is None


def test_work_items_are_the_selected_rows_times_n() -> None:
    assert work_item_count(official_inputs(n=3)) == 15
    assert work_item_count({"dataset": {"selected_source_rows": [0, 1]}, "n": 1}) is None
    assert work_item_count({}) is None
