"""A rollout's conversation as the dashboard shows it: read from its live preview
(PROTOCOL.md §8.2) as it changes, or built from its final sample. Files only: no HTTP here.

`preview.json` is a trimmed trajectory document in the ATIF shape, and two shapes of it are
read into one model (`Transcript`):

- server_stub's (trajectory.json's, ATIF-v1.2): one step per chat message, `source` user,
  system, agent or environment (a tool's answer), the message's content as it was, and its
  tool calls as the chat API spells them (`{"id", "function": {"name", "arguments": "<json>"}}`);
- the official server's (ATIF-v1.7): sources user, system and agent only, tool calls as
  `{"tool_call_id", "function_name", "arguments": {...}}`, the tools' answers folded into the
  agent step that called them (`observation.results`), content as text or a list of parts.

Both hold `extra.osmosis` (rollout_id, preview, turn, truncated, status, preview_version,
updated_at). A file that is missing, half written, too large or not such a document gives no
transcript and says why; nothing here raises into the caller for what a file holds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from core.iso_time import utc_moment
from core.regular_file import open_regular, read_at_most
from core.types import (
    MAX_PREVIEW_BYTES,
    MAX_PREVIEW_STEPS,
    MAX_PREVIEW_TEXT_CHARS,
    PREVIEW_FILE,
    PREVIEW_ID,
    RolloutSample,
)

#: Files a little over the protocol's bound on a preview are still read (another writer may
#: count differently), far over it are refused unread.
MAX_READ_BYTES = MAX_PREVIEW_BYTES + 124 * 1024
#: A finished attempt's trajectory is the whole conversation, not a window of it: read up to
#: this (its latest `MAX_PREVIEW_STEPS` steps shown, as a preview's), refused past it.
MAX_TRAJECTORY_BYTES = 16 * 1024 * 1024
CLIPPED_MARK = " […]"
#: The problem of a preview file that does not exist (yet: a server writes the first one within
#: 3 s of the rollout's start, when its workflow shows its conversation).
PREVIEW_MISSING = "no preview yet"

Origin = Literal["preview", "sample", "trajectory"]
# ATIF's step sources and the chat roles, as the roles the transcript shows.
_ROLES = {
    "agent": "assistant",
    "assistant": "assistant",
    "user": "user",
    "system": "system",
    "developer": "system",
    "environment": "tool",
    "tool": "tool",
    "function": "tool",
}
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
_IMAGE_PART_TYPES = frozenset({"image", "image_url", "input_image"})
# An OpenAI Agents SDK output item: a message whose content is a list of parts.
_OUTPUT_ITEM = "message"
# Names, statuses and ids are short; a longer value is cut (preview ids are at most 256).
MAX_NAME_CHARS = 256
#: How many levels of content a message's text is read through: each output item (or list of
#: them) whose content is more items goes one level down, and a string that JSON-encodes them
#: is at the level of what it holds. Real conversations use two or three. Each level costs the
#: reader a few stack frames, and a 16 kB string of items nested ~560 deep (in a dataset
#: prompt, a preview) took it past Python's recursion limit inside the dashboard (issue 30);
#: what lies deeper shows as `NESTED_TOO_DEEPLY`.
MAX_CONTENT_DEPTH = 32
NESTED_TOO_DEEPLY = "[unprintable: nested too deeply]"


@dataclass(frozen=True)
class ToolCall:
    """A tool the model asked for: its name and arguments (as text: JSON, usually)."""

    name: str
    arguments: str
    call_id: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """What a tool answered (official previews fold it into the step that called it)."""

    text: str
    call_id: str | None = None


@dataclass(frozen=True)
class TranscriptStep:
    """One message of the conversation."""

    #: system, user, assistant or tool (another role is kept as it was given).
    role: str
    #: What the document called it: the ATIF step source, or the chat role.
    source: str
    text: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    #: The tool call a tool message answers (a final sample's tool messages say so).
    call_id: str | None = None
    #: The step's place in the whole conversation, from 1, when the writer knew it.
    step_id: int | None = None


@dataclass(frozen=True)
class Transcript:
    """The latest steps of a rollout's conversation, and what the writer said about them.

    Fields that tell one version from the next come first: comparing two transcripts for a
    repaint stops at the first difference."""

    origin: Origin
    preview_version: int | None
    updated_at: datetime | None
    status: str | None
    turn: int | None
    #: Older steps or parts of long texts were left out (by the server, for a preview).
    truncated: bool
    steps: tuple[TranscriptStep, ...]
    rollout_id: str | None = None


class _Unreadable(Exception):
    """Why a preview file gives no transcript (the message says it to the user)."""


# -- reading a preview file -------------------------------------------------------------------


def preview_path(root: Path, rollout_id: str, file: str = PREVIEW_FILE) -> Path | None:
    """Where the preview (or another `file` a server keeps per rollout) of `rollout_id` is
    under `root`; None for an id that no server writes a preview for (and that could name a
    path outside the root)."""
    if not PREVIEW_ID.fullmatch(rollout_id):
        return None
    return root / rollout_id / file


def read_preview(
    path: Path,
    *,
    root: Path | None = None,
    on_problem: Callable[[str], None] | None = None,
) -> Transcript | None:
    """The transcript in the preview file `path` (under the previews `root`, when given: no
    symlink below it is followed); None when there is none, after telling `on_problem` why
    (missing, a symlink, too large, not JSON, not a trajectory document, ...)."""
    try:
        return _read(path, root)
    except _Unreadable as problem:
        if on_problem is not None:
            on_problem(str(problem))
        return None


def read_trajectory(path: Path, *, root: Path | None = None) -> Transcript | None:
    """The conversation in a finished attempt's trajectory (the ATIF document a rollout server
    leaves in `rollout_trials/<rollout_id>/trajectory.json`, EVAL.md §8, read as a preview is,
    under `root` when given), or None when there is none to read."""
    try:
        return replace(_read(path, root, MAX_TRAJECTORY_BYTES), origin="trajectory")
    except _Unreadable:
        return None


def _read(path: Path, root: Path | None, limit: int = MAX_READ_BYTES) -> Transcript:
    # Regular files only, opened without blocking (a FIFO put in the preview's place cannot
    # hang the reader) and not through a symlink anywhere below the previews root (a rollout
    # server cannot make the dashboard show another file, by the file or by its folder).
    try:
        descriptor = open_regular(path, under=root)
    except FileNotFoundError:
        raise _Unreadable(PREVIEW_MISSING) from None
    except OSError as exc:
        raise _Unreadable(f"cannot open the preview: {exc.strerror or exc}") from None
    try:
        size = os.fstat(descriptor).st_size
        if size > limit:
            raise _Unreadable(_too_large(size, limit))
        data = read_at_most(descriptor, limit + 1)
    except OSError as exc:
        raise _Unreadable(f"cannot read the preview: {exc.strerror or exc}") from None
    finally:
        os.close(descriptor)
    if len(data) > limit:  # it grew after its size was looked at
        raise _Unreadable(_too_large(len(data), limit))
    return _parse(data)


def _too_large(size: int, limit: int) -> str:
    return f"the preview is too large ({size:,} bytes; at most {limit:,} are read)"


def _parse(data: bytes) -> Transcript:
    if not data.strip():
        raise _Unreadable("the preview is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Unreadable("the preview is not UTF-8 text") from None
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise _Unreadable(f"the preview is not JSON ({exc})") from None
    except RecursionError:
        raise _Unreadable("the preview is nested too deeply") from None
    if not isinstance(document, dict) or not isinstance(document.get("steps"), list):
        raise _Unreadable("the preview is not a trajectory document (it has no list of steps)")
    metadata = _mapping(_mapping(document.get("extra")).get("osmosis"))
    raw_steps: list[Any] = document["steps"]
    window = raw_steps[-MAX_PREVIEW_STEPS:]
    clipped = _Clipped(len(window) < len(raw_steps))
    steps = tuple(
        _atif_step(step, clipped) for step in window if isinstance(step, Mapping) and step
    )
    rollout_id = metadata.get("rollout_id")
    if not isinstance(rollout_id, str):
        session = document.get("session_id")
        rollout_id = session if isinstance(session, str) else None
    return Transcript(
        origin="preview",
        preview_version=_count(metadata.get("preview_version")),
        updated_at=utc_moment(metadata.get("updated_at")),
        status=_short(metadata.get("status")),
        turn=_count(metadata.get("turn")),
        truncated=metadata.get("truncated") is True or clipped.any,
        steps=steps,
        rollout_id=rollout_id,
    )


def _atif_step(step: Mapping[str, Any], clipped: _Clipped) -> TranscriptStep:
    source = _short(step.get("source")) or "?"
    extra = _mapping(_mapping(step.get("extra")).get("osmosis"))
    observation = _mapping(step.get("observation"))
    results = observation.get("results")
    return TranscriptStep(
        role=_ROLES.get(source, source),
        source=source,
        text=clipped.text(content_text(step.get("message"))),
        reasoning=_optional_text(step.get("reasoning_content"), clipped),
        tool_calls=_tool_calls(step.get("tool_calls"), clipped),
        tool_results=tuple(
            ToolResult(
                clipped.text(content_text(result.get("content"))),
                _short(result.get("source_call_id")),
            )
            for result in (results if isinstance(results, list) else ())
            if isinstance(result, Mapping)
        ),
        step_id=_count(extra.get("original_step_id")),
    )


# -- a final sample ---------------------------------------------------------------------------


def transcript_of_sample(sample: RolloutSample, *, status: str | None = None) -> Transcript:
    """The transcript of a finished rollout's sample (its chat messages): the latest
    `MAX_PREVIEW_STEPS` of them, numbered in the whole conversation."""
    messages = sample.messages
    first = max(len(messages) - MAX_PREVIEW_STEPS, 0)
    clipped = _Clipped(first > 0)
    steps = tuple(
        _chat_step(message, first + offset + 1, clipped)
        for offset, message in enumerate(messages[first:])
        if isinstance(message, Mapping)
    )
    turn = sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")
    return Transcript(
        origin="sample",
        preview_version=None,
        updated_at=None,
        status=status,
        turn=turn,
        truncated=clipped.any,
        steps=steps,
    )


def _chat_step(message: Mapping[str, Any], step_id: int, clipped: _Clipped) -> TranscriptStep:
    role = _short(message.get("role")) or "?"
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = message.get("reasoning")
    return TranscriptStep(
        role=_ROLES.get(role, role),
        source=role,
        text=clipped.text(content_text(message.get("content"))),
        reasoning=_optional_text(reasoning, clipped),
        tool_calls=_tool_calls(message.get("tool_calls"), clipped),
        call_id=_short(message.get("tool_call_id")),
        step_id=step_id,
    )


# -- values of either shape -------------------------------------------------------------------


class _Clipped:
    """Bounds the texts of one transcript and remembers whether anything was left out."""

    def __init__(self, already: bool) -> None:
        self.any = already

    def text(self, text: str) -> str:
        if len(text) <= MAX_PREVIEW_TEXT_CHARS:
            return text
        self.any = True
        return text[:MAX_PREVIEW_TEXT_CHARS] + CLIPPED_MARK


def _tool_calls(value: object, clipped: _Clipped) -> tuple[ToolCall, ...]:
    """Tool calls in either spelling: ATIF's (`function_name`, `arguments` an object) or the
    chat API's (`function.name`, `function.arguments` a JSON string)."""
    if not isinstance(value, list):
        return ()
    calls = []
    for item in value:
        if not isinstance(item, Mapping):
            continue
        function = _mapping(item.get("function"))
        name = item.get("function_name", function.get("name"))
        arguments = item.get("arguments", function.get("arguments"))
        calls.append(
            ToolCall(
                name=_short(name) or "?",
                arguments=clipped.text(
                    arguments if isinstance(arguments, str) else _json_text(arguments)
                ),
                call_id=_short(item.get("tool_call_id", item.get("id"))),
            )
        )
    return tuple(calls)


def content_text(content: object) -> str:
    """A message's content as text: a string as it is, the text of content parts (an image as
    `[image]`), anything else as JSON. OpenAI Agents rollouts keep the SDK's shapes: an output
    item (`{"type": "message", "content": [parts]}`) reads as its parts, and a string that is
    such parts or items JSON-encoded as their text (any other JSON string stays as it is).
    Content nested more than `MAX_CONTENT_DEPTH` levels shows `NESTED_TOO_DEEPLY` there."""
    return _content_text(content, MAX_CONTENT_DEPTH)


def _content_text(content: object, depth_left: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        encoded = _encoded_parts(content)
        if encoded is None:
            return content
        content = encoded  # its parts, at the string's own level
    if isinstance(content, (list, Mapping)) and depth_left <= 0:
        return NESTED_TOO_DEEPLY
    if isinstance(content, list):
        return "\n".join(_part_text(part, depth_left - 1) for part in content)
    if isinstance(content, Mapping):
        return _part_text(content, depth_left - 1)
    return _json_text(content)


def _part_text(part: object, depth_left: int) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, Mapping):
        kind = part.get("type")
        if kind in _TEXT_PART_TYPES and isinstance(part.get("text"), str):
            return str(part["text"])
        if kind in _IMAGE_PART_TYPES:
            return "[image]"
        if kind == "refusal" and isinstance(part.get("refusal"), str):
            return str(part["refusal"])
        if kind == _OUTPUT_ITEM and "content" in part:
            return _content_text(part["content"], depth_left)
    return _json_text(part)


def _encoded_parts(text: str) -> object | None:
    """The parts or output items `text` holds JSON-encoded, else None."""
    if text.lstrip()[:1] not in ("[", "{"):
        return None
    try:
        value: object = json.loads(text)
    except (ValueError, RecursionError):
        return None
    items = value if isinstance(value, list) else [value]
    known = {*_TEXT_PART_TYPES, "refusal", _OUTPUT_ITEM}
    if items and all(isinstance(item, Mapping) and item.get("type") in known for item in items):
        return value
    return None


def _json_text(value: object) -> str:
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return "[unprintable value]"


def _optional_text(value: object, clipped: _Clipped) -> str | None:
    if value is None or value == "":
        return None
    return clipped.text(value if isinstance(value, str) else _json_text(value))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _short(value: object) -> str | None:
    """A name-like value (a role, a status, an id) or None; bounded, never a whole text."""
    if not isinstance(value, str) or not value:
        return None
    return value[:MAX_NAME_CHARS]


def _count(value: object) -> int | None:
    # bool is an int subclass, and `true` is not a version or a turn.
    return value if type(value) is int and value >= 0 else None


# -- following a preview file -----------------------------------------------------------------


class PreviewWatcher:
    """Follows one rollout's preview.json: it is read again only when the file changed (its
    inode, size or modification time), and a new read counts as a change only when the
    transcript differs (a file rewritten with the same preview is not one)."""

    def __init__(self, path: Path, *, root: Path | None = None) -> None:
        self.path = path
        #: The previews root `path` lies under: no symlink below it is followed.
        self.root = root
        #: The latest preview read from the file; kept when a later look finds none.
        self.transcript: Transcript | None = None
        #: Why the latest look found no preview (None when `transcript` is the file's).
        self.problem: str | None = None
        self._seen: tuple[int, int, int] | None = None

    def poll(self) -> bool:
        """Look at the file again; True when the transcript or the problem changed."""
        try:
            info = os.lstat(self.path)
        except OSError as exc:
            self._seen = None
            reason = PREVIEW_MISSING if isinstance(exc, FileNotFoundError) else None
            return self._set_problem(reason or f"cannot open the preview: {exc.strerror or exc}")
        seen = (info.st_ino, info.st_size, info.st_mtime_ns)
        if seen == self._seen:
            return False
        self._seen = seen
        problems: list[str] = []
        transcript = read_preview(self.path, root=self.root, on_problem=problems.append)
        if transcript is None:
            return self._set_problem(problems[0] if problems else "no preview")
        changed = self.problem is not None
        # The same preview keeps its object: a viewer tells a change by identity.
        if transcript != self.transcript:
            self.transcript, changed = transcript, True
        self.problem = None
        return changed

    def _set_problem(self, problem: str) -> bool:
        changed = problem != self.problem
        self.problem = problem
        return changed
