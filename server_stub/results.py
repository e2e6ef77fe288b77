"""Turning a backend's outcome into the wire result, and saving it to disk (PROTOCOL.md §4.2)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.types import RolloutInitRequest, RolloutResultResponse, RolloutSample, RolloutStatus
from server_stub.atomic_file import replace_file
from server_stub.backend import ExecutionOutcome, ExecutionResult
from server_stub.log_safety import server_logger

logger = server_logger(__name__)

_DROP = object()


def clean_text(text: str) -> str:
    """Replace lone UTF-16 surrogates, which JSON encoders refuse, with '?'."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def json_fit(value: Any) -> Any:
    """A JSON-safe copy: NumPy-style scalars unwrapped; non-finite and unencodable values dropped.

    Dropping the parts that cannot be encoded (rather than the whole sample) keeps the reward
    and the rest of the conversation pollable.
    """
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _DROP
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        fitted = {}
        for key, item in value.items():
            if not isinstance(key, str):
                continue
            fitted_item = json_fit(item)
            if fitted_item is not _DROP:
                fitted[clean_text(key)] = fitted_item
        return fitted
    if isinstance(value, (list, tuple)):
        return [item for item in map(json_fit, value) if item is not _DROP]
    item = getattr(value, "item", None)  # NumPy scalars, without importing NumPy
    if callable(item):
        try:
            return json_fit(item())
        except Exception:
            return _DROP
    return _DROP


def _wire_sample(sample: RolloutSample, status: RolloutStatus) -> RolloutSample:
    keep_reward = status == RolloutStatus.SUCCESS and not sample.remove_sample
    fields: dict[str, Any] = {
        "messages": json_fit(sample.messages),
        "label": clean_text(sample.label) if sample.label is not None else None,
        "reward": sample.reward if keep_reward else None,
        "remove_sample": sample.remove_sample,
        "metrics": json_fit(sample.metrics),
        "extra_fields": json_fit(sample.extra_fields),
    }
    return RolloutSample.model_construct(**fields, trajectory_messages=None)


def shape_result(rollout_id: str, result: ExecutionResult) -> RolloutResultResponse:
    """The terminal wire result: no trajectory copy, reward only on success, clean text."""
    message = result.err_message
    return RolloutResultResponse.model_construct(
        rollout_id=rollout_id,
        status=result.status,
        sample=None if result.sample is None else _wire_sample(result.sample, result.status),
        err_message=clean_text(message) if message is not None else None,
        err_category=result.err_category,
    )


def encode_result(response: RolloutResultResponse) -> bytes:
    """The JSON body of a result; `trajectory_messages` never goes on the wire."""
    sample = response.sample
    body = {
        "rollout_id": response.rollout_id,
        "status": response.status.value,
        "sample": None
        if sample is None
        else {
            "messages": sample.messages,
            "label": sample.label,
            "reward": sample.reward,
            "remove_sample": sample.remove_sample,
            "metrics": sample.metrics,
            "extra_fields": sample.extra_fields,
        },
        "err_message": response.err_message,
        "err_category": None if response.err_category is None else response.err_category.value,
    }
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()


def save_artifacts(
    root: Path, request: RolloutInitRequest, outcome: ExecutionOutcome, process_id: str
) -> None:
    """Best effort: `trajectory.json` (and `diagnostics.json`) under `<root>/<rollout_id>/`."""
    saved = outcome.result_to_save
    folder = root / request.rollout_id
    try:
        if saved.extra_fields is not None:
            _write_json(folder / "diagnostics.json", json_fit(saved.extra_fields))
        sample = saved.sample
        if sample is not None and sample.trajectory_messages is not None:
            _write_json(folder / "trajectory.json", trajectory_document(request, saved, process_id))
    except Exception:
        logger.exception("could not save the trajectory of rollout %s", request.rollout_id)


def trajectory_document(
    request: RolloutInitRequest, result: ExecutionResult, process_id: str
) -> dict[str, Any]:
    """An ATIF-style trajectory: one step per message, with the outcome and request extras."""
    sample = result.sample
    assert sample is not None and sample.trajectory_messages is not None
    return {
        **trajectory_head(request.rollout_id),
        "steps": trajectory_steps(sample.trajectory_messages),
        "final_metrics": {"reward": sample.reward, **json_fit(sample.metrics)},
        "extra": {
            "osmosis": {
                "status": result.status.value,
                "err_message": result.err_message,
                "err_category": result.err_category.value if result.err_category else None,
                "label": sample.label,
                "process_id": process_id,
                "saved_at": time.time(),
                "request_extra_fields": json_fit(request.extra_fields or {}),
            }
        },
    }


def trajectory_head(rollout_id: str) -> dict[str, Any]:
    """What opens every trajectory document of a rollout (trajectory.json, preview.json)."""
    return {
        "schema_version": "ATIF-v1.2",
        "session_id": rollout_id,
        "agent": {"name": "osmosis-tui server_stub", "version": "0.1.0"},
    }


_STEP_SOURCES = {"user": "user", "system": "system", "assistant": "agent", "tool": "environment"}


def trajectory_steps(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One step per chat message, numbered from 1, JSON-safe."""
    return [
        {
            "step_id": index,
            "source": _STEP_SOURCES.get(str(message.get("role")), "environment"),
            "message": json_fit(message.get("content")),
            **({"tool_calls": json_fit(message["tool_calls"])} if "tool_calls" in message else {}),
        }
        for index, message in enumerate(messages, start=1)
    ]


def _write_json(path: Path, document: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, ensure_ascii=False, indent=1, allow_nan=False)
    replace_file(path, text.encode())
