"""`manifest.json` of an eval run (EVAL.md §8): the resume lock, in the official shape.

Written once, when the run folder is created, and never rewritten (the official upload
hashes its bytes):

```json
{
  "schema_version": 1,
  "local_run_id": "<32 lowercase hex>",
  "run_name": "r1",
  "created_at": "2026-12-01T08:46:54.155727Z",
  "inputs": {
    "model_path": "openai/gpt-5-mini",
    "dataset": {"sha256": "<file bytes>", "selected_source_rows": "0-4,7"},
    "n": 1,
    "rollout": {"name": "multiply", "entrypoint": "main.py", "source_digest": "<64 hex>"},
    "env": {"NAME": "value"},
    "secret_names": ["OPENAI_API_KEY"],
    "timeouts": {"agent_timeout_sec": 450.0, "grader_timeout_sec": null},
    "versions": {"rollout_protocol": "0.4", "dataset_normalization": 1, "state_schema": 1}
  },
  "provenance": {"sdk_version": "0.3.8", "config_path": "configs/eval/x.toml", ...}
}
```

`inputs` is what a resume must not change; a resume compares its top-level keys, as the
official tool does, and refuses naming the ones that differ. Left out on purpose, so that
they may change between invocations: the run name and output path, concurrency
(`batch_size`, `--max-in-flight`), `pass_threshold`, `limit` as such (only the rows it
selects), UI flags, versions of the tools, timestamps and secret values.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from core.eval.results.records import iso_utc
from core.eval.untrusted_json import load_json_file

SCHEMA_VERSION = 1
# What the official tool records in `inputs.versions`; a run of another protocol or dataset
# normalisation must not resume as this one.
ROLLOUT_PROTOCOL_VERSION = "0.4"
DATASET_NORMALIZATION_VERSION = 1
# The osmosis-ai release whose results folder this is, key for key: `provenance.sdk_version`.
OFFICIAL_SDK_VERSION = "0.3.8"


class ManifestError(ValueError):
    """`manifest.json` cannot be read as a run manifest (the message says why)."""


def format_row_selector(source_rows: Iterable[int]) -> str:
    """The selected source rows as the official compact selector: sorted, deduplicated,
    consecutive rows as `a-b`, joined by commas (`"0-4"`, `"1-2,4-5"`, `"0"`)."""
    ordered = sorted(set(source_rows))
    spans: list[str] = []
    index = 0
    while index < len(ordered):
        end = index
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        first, last = ordered[index], ordered[end]
        spans.append(str(first) if first == last else f"{first}-{last}")
        index = end + 1
    return ",".join(spans)


def selector_spans(selector: str) -> list[tuple[int, int]] | None:
    """The `(first, last)` spans of a `format_row_selector` string, as written; None when it
    is not one."""
    spans: list[tuple[int, int]] = []
    for span in selector.split(","):
        first, dash, last = span.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            return None
        low, high = int(first), int(last if dash else first)
        if high < low:
            return None
        spans.append((low, high))
    return spans


def count_selected_rows(selector: str) -> int | None:
    """How many rows a `format_row_selector` string names; None when it is not one."""
    spans = selector_spans(selector)
    return None if spans is None else sum(high - low + 1 for low, high in spans)


def work_item_count(inputs: Mapping[str, Any]) -> int | None:
    """How many work items a manifest's `inputs` make (selected rows x n); None when they do
    not say (a manifest of another shape)."""
    dataset, n = inputs.get("dataset"), inputs.get("n")
    selector = dataset.get("selected_source_rows") if isinstance(dataset, dict) else None
    if not isinstance(selector, str) or isinstance(n, bool) or not isinstance(n, int):
        return None
    rows = count_selected_rows(selector)
    return None if rows is None else rows * n


def manifest_inputs(
    *,
    model_path: str,
    dataset_sha256: str,
    selected_source_rows: Iterable[int],
    n: int,
    rollout_name: str,
    entrypoint: str,
    source_digest: str,
    env: Mapping[str, str],
    secret_names: Iterable[str],
    agent_timeout_sec: float | None,
    grader_timeout_sec: float | None,
) -> dict[str, Any]:
    """The manifest's `inputs`, keys and value formats as official (timeouts as floats)."""
    return {
        "model_path": model_path,
        "dataset": {
            "sha256": dataset_sha256,
            "selected_source_rows": format_row_selector(selected_source_rows),
        },
        "n": n,
        "rollout": {"name": rollout_name, "entrypoint": entrypoint, "source_digest": source_digest},
        "env": dict(sorted(env.items())),
        "secret_names": sorted(secret_names),
        "timeouts": {
            "agent_timeout_sec": None if agent_timeout_sec is None else float(agent_timeout_sec),
            "grader_timeout_sec": None if grader_timeout_sec is None else float(grader_timeout_sec),
        },
        "versions": {
            "rollout_protocol": ROLLOUT_PROTOCOL_VERSION,
            "dataset_normalization": DATASET_NORMALIZATION_VERSION,
            "state_schema": SCHEMA_VERSION,
        },
    }


def changed_input_keys(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The top-level `inputs` keys whose values differ (added or removed ones included),
    sorted. Values compare as parsed JSON does in Python, as official: `60` equals `60.0`."""
    return sorted(key for key in {*stored, *current} if stored.get(key) != current.get(key))


def new_manifest(
    run_name: str, inputs: Mapping[str, Any], provenance: Mapping[str, Any]
) -> dict[str, Any]:
    """A new run's manifest: a fresh `local_run_id` (uuid4, 32 lowercase hex), created now."""
    return {
        "schema_version": SCHEMA_VERSION,
        "local_run_id": uuid.uuid4().hex,
        "run_name": run_name,
        "created_at": iso_utc(),
        "inputs": dict(inputs),
        "provenance": dict(provenance),
    }


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest at `path` (ours or the official tool's), read as `load_json_file` reads
    (a regular file, bounded); `ManifestError` says what is wrong with it."""
    try:
        manifest = load_json_file(path)
    except OSError as exc:
        raise ManifestError(f"{path} cannot be read ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise ManifestError(f"{path} cannot be read ({exc})") from exc
    if not isinstance(manifest, dict):
        raise ManifestError(f"{path} is not a JSON object")
    version = manifest.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ManifestError(
            f"{path} was written by results schema version {version!r}; this osmosis-tui "
            f"reads version {SCHEMA_VERSION}"
        )
    if not isinstance(manifest.get("inputs"), dict):
        raise ManifestError(f"{path} has no inputs object")
    for key in ("local_run_id", "run_name", "created_at"):
        if not isinstance(manifest.get(key), str):
            raise ManifestError(f"{path} has no {key}")
    return manifest


__all__ = [
    "DATASET_NORMALIZATION_VERSION",
    "OFFICIAL_SDK_VERSION",
    "ROLLOUT_PROTOCOL_VERSION",
    "SCHEMA_VERSION",
    "ManifestError",
    "changed_input_keys",
    "count_selected_rows",
    "format_row_selector",
    "manifest_inputs",
    "new_manifest",
    "read_manifest",
    "selector_spans",
    "work_item_count",
]
