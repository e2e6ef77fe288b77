"""The live preview of a rollout: its latest steps, in the shape of trajectory.json, trimmed,
bounded and with secrets redacted (PROTOCOL.md §8.2). Pure functions: no I/O, no event loop.

The source is what the rollout's `SampleSource.get_preview(max_messages)` returns: a sample
whose `trajectory_messages` are the newest messages, and whose `extra_fields` may say whether
older ones were left out (`_preview_truncated`) and how many model turns the rollout has taken
so far (`_preview_turn`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from core.secret_forms import known_secrets_pattern
from core.types import MAX_PREVIEW_BYTES, MAX_PREVIEW_STEPS, MAX_PREVIEW_TEXT_CHARS, RolloutSample
from server_stub.results import trajectory_head, trajectory_steps

# Per container and nesting depth (and per string, MAX_PREVIEW_TEXT_CHARS): one huge tool
# result cannot crowd out the rest.
MAX_ITEMS = 1000
MAX_DEPTH = 20
MAX_TURN = 1_000_000
TRUNCATED_MARK = " [preview truncated]"
REDACTED = "[REDACTED]"
# Room left for what each write adds (status, preview_version, updated_at).
METADATA_ROOM = 256

# Per-token data a viewer has no use for, and by far the bulkiest part of a model reply.
_DROPPED_KEYS = frozenset({"prompt_token_ids", "completion_token_ids", "logprobs"})
# Dict keys whose values are credentials, compared after normalising to snake_case.
_CREDENTIAL_KEYS = (
    "api_key",
    "apikey",
    "access_key",
    "access_token",
    "auth_token",
    "authorization",
    "client_secret",
    "credential",
    "credentials",
    "password",
    "passwd",
    "private_key",
    "secret",
    "secret_key",
    "token",
)
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")

# Credentials inside free text: an Authorization header value, a bearer token, an `sk-` key,
# a password in a URL, a value assigned to a credential-like name. Every pattern starts from a
# fixed word or from the start of a run, so a long run of identifier characters is scanned once
# rather than once per position (these run over model output, which may be anything).
_AUTHORIZATION = re.compile(
    r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|token)\s+)?[^\s\"',;]+"
)
_BEARER = re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]{8,}=*")
_SK_KEY = re.compile(r"(?<![A-Za-z0-9_\-])sk-[A-Za-z0-9_\-]{8,}")
_URL_PASSWORD = re.compile(r"(?i)(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]*://)[^\s/@:]+:[^\s/@]+@")
# The name before the keyword ("ROLLOUT_LLM_" in "ROLLOUT_LLM_API_KEY=...") is left as it is.
_ASSIGNED = re.compile(
    r"(?i)((?:api[_\-]?key|secret|password|passwd|access[_\-]?token|auth[_\-]?token)[\"']?\s*[:=]\s*)"
    r"(\[REDACTED\]|\"[^\"]*\"|'[^']*'|[^\s\"',;}\]]+)"
)

Json = Any


def preview_document(
    sample: RolloutSample, rollout_id: str, api_key: str | None, secrets: Iterable[str] = ()
) -> dict[str, Json] | None:
    """The preview of `sample`, or None when it has no messages to show; the rollout's
    `api_key` and the server's `secrets` (the values of `SECRET_NAMES_ENV`) are masked in it.

    `extra.osmosis` holds `rollout_id`, `preview`, `turn` and `truncated`; the publisher adds
    `status`, `preview_version` and `updated_at` on each write.
    """
    messages = sample.trajectory_messages
    if not messages:
        return None
    reported = sample.extra_fields.get("_preview_truncated")
    # A source that does not say whether it left messages out may have, once its window is full.
    truncated = bool(reported) if reported is not None else len(messages) >= MAX_PREVIEW_STEPS
    window = messages[-MAX_PREVIEW_STEPS:]
    truncated = truncated or len(window) < len(messages)
    # Step ids of the whole conversation are known only when the source says it left nothing
    # out; otherwise they would be positions in a window, not in the rollout.
    first_id = len(messages) - len(window) + 1 if reported is False else None
    clipper = _Clipper(_Redactor([api_key, *secrets]))
    steps = []
    for offset, step in enumerate(trajectory_steps(window)):
        shown = clipper.clip(step)
        shown["step_id"] = offset + 1
        shown["extra"] = {
            "osmosis": {"original_step_id": None if first_id is None else first_id + offset}
        }
        steps.append(shown)
    document: dict[str, Json] = {
        **trajectory_head(rollout_id),
        "steps": steps,
        "extra": {
            "osmosis": {
                "rollout_id": rollout_id,
                "preview": True,
                "turn": _turn(sample.extra_fields.get("_preview_turn")),
                "truncated": truncated or clipper.clipped,
            }
        },
    }
    return _fit(document)


def encode(document: dict[str, Json]) -> bytes:
    """The bytes written to preview.json (and compared to see whether anything changed)."""
    return json.dumps(document, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def _turn(value: object) -> int | None:
    # bool is an int subclass, and `True` turns is certainly not a count.
    if type(value) is not int:
        return None
    return min(max(value, 0), MAX_TURN)


def _fit(document: dict[str, Json]) -> dict[str, Json]:
    """Keep the newest steps that fit in the size limit (renumbered from 1); at least one."""
    limit = MAX_PREVIEW_BYTES - METADATA_ROOM
    if len(encode(document)) <= limit:
        return document
    document["extra"]["osmosis"]["truncated"] = True
    steps, document["steps"] = document["steps"], []
    # Renumbering from 1 never makes a step longer, so the sizes measured now bound the result.
    size, kept = len(encode(document)), 0
    for step in reversed(steps):
        size += len(encode(step)) + 1
        if size > limit:
            break
        kept += 1
    document["steps"] = steps[len(steps) - kept :] or [
        {
            "step_id": 1,
            "source": "system",
            "message": "The latest step is too large for a live preview.",
            "extra": {"osmosis": {"original_step_id": None}},
        }
    ]
    for index, step in enumerate(document["steps"], start=1):
        step["step_id"] = index
    return document


class _Redactor:
    """Masks known secrets (by the rule every writer of ours shares, `core.secret_forms`),
    credential-like text and credential-named fields."""

    def __init__(self, known: Iterable[str | None]) -> None:
        self._known = known_secrets_pattern(known)

    def text(self, value: str) -> str:
        if self._known is not None:
            value = self._known.sub(REDACTED, value)
        value = _AUTHORIZATION.sub(lambda m: m[1] + (f"{m[2]} " if m[2] else "") + REDACTED, value)
        value = _BEARER.sub(lambda m: m[1] + REDACTED, value)
        value = _SK_KEY.sub(REDACTED, value)
        value = _URL_PASSWORD.sub(lambda m: m[1] + REDACTED + "@", value)
        return _ASSIGNED.sub(lambda m: m[1] + REDACTED, value)

    @staticmethod
    def names_credential(key: str) -> bool:
        name = _CAMEL.sub(r"\1_\2", key).lower().replace("-", "_")
        return any(name == word or name.endswith("_" + word) for word in _CREDENTIAL_KEYS)


class _Clipper:
    """Copies a JSON value with every string redacted and the size limits applied."""

    def __init__(self, redactor: _Redactor) -> None:
        self.redactor = redactor
        #: Whether anything was cut or left out.
        self.clipped = False

    def clip(self, value: Json, depth: int = 0) -> Json:
        if depth > MAX_DEPTH:
            self.clipped = True
            return TRUNCATED_MARK.strip()
        if isinstance(value, str):
            text = self.redactor.text(value)
            if len(text) > MAX_PREVIEW_TEXT_CHARS:
                self.clipped = True
                return text[:MAX_PREVIEW_TEXT_CHARS] + TRUNCATED_MARK
            return text
        if isinstance(value, dict):
            if len(value) > MAX_ITEMS:
                self.clipped = True
            return {
                self.redactor.text(key): (
                    REDACTED if self.redactor.names_credential(key) else self.clip(item, depth + 1)
                )
                for key, item in list(value.items())[:MAX_ITEMS]
                if key not in _DROPPED_KEYS
            }
        if isinstance(value, list):
            if len(value) > MAX_ITEMS:
                self.clipped = True
            return [self.clip(item, depth + 1) for item in value[:MAX_ITEMS]]
        return value
