"""Transcripts (core/transcript.py): both shapes of preview.json read into one model, files that
hold none, the final sample's messages, and following a preview file as it is replaced."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import core.transcript as transcript_module
from core.transcript import (
    MAX_READ_BYTES,
    NESTED_TOO_DEEPLY,
    PreviewWatcher,
    ToolCall,
    ToolResult,
    Transcript,
    TranscriptStep,
    preview_path,
    read_preview,
    transcript_of_sample,
)
from core.types import (
    MAX_PREVIEW_BYTES,
    MAX_PREVIEW_STEPS,
    MAX_PREVIEW_TEXT_CHARS,
    PREVIEW_FILE,
    RolloutSample,
    RolloutStatus,
)
from server_stub import previews as stub_previews
from server_stub.message_source import MessageSource
from server_stub.workflow import RolloutContext
from tests.deep_content import nested_items, nested_items_text
from tests.polling import eventually

ROLLOUT_ID = "r-1"
SECRET_KEY = "sk-transcript-test-0123456789"

# The official server's shape (ATIF-v1.7), written by hand after its preview writer: sources
# system, user and agent; tool calls by `function_name` with object arguments; the tool's
# answer folded into the step that called it; content as text or a list of parts.
OFFICIAL: dict[str, Any] = {
    "schema_version": "ATIF-v1.7",
    "session_id": ROLLOUT_ID,
    "trajectory_id": ROLLOUT_ID,
    "agent": {"name": "calculator", "version": "1.0.0", "model_name": "gpt-5-mini"},
    "steps": [
        {
            "step_id": 1,
            "source": "system",
            "message": "You are a careful calculator.",
            "extra": {"osmosis": {"original_step_id": 1}},
        },
        {
            "step_id": 2,
            "source": "user",
            "message": [
                {"type": "text", "text": "What is 6 * 7?"},
                {"type": "image", "source": {"media_type": "image/png", "path": "sum.png"}},
            ],
            "extra": {"osmosis": {"original_step_id": 2}},
        },
        {
            "step_id": 3,
            "source": "agent",
            "model_name": "gpt-5-mini",
            "message": "Let me multiply.",
            "reasoning_content": "6 * 7 is a product",
            "tool_calls": [
                {
                    "tool_call_id": "call_1",
                    "function_name": "multiply",
                    "arguments": {"a": 6, "b": 7},
                }
            ],
            "observation": {"results": [{"source_call_id": "call_1", "content": "42"}]},
            "extra": {"osmosis": {"original_step_id": 3}},
        },
        {
            "step_id": 4,
            "source": "agent",
            "message": "42",
            "extra": {"osmosis": {"original_step_id": None}},
        },
    ],
    "extra": {
        "osmosis": {
            "rollout_id": ROLLOUT_ID,
            "preview": True,
            "turn": 2,
            "truncated": False,
            "status": "running",
            "preview_version": 3,
            "updated_at": "2026-03-01T12:00:03.500000+00:00",
        }
    },
}

# A conversation with a tool call, as a chat-API workflow keeps it.
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful calculator."},
    {"role": "user", "content": f"What is 6 * 7? My key is {SECRET_KEY}"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    {"role": "assistant", "content": "42"},
]


def write(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def read_or_problem(path: Path) -> tuple[Transcript | None, list[str]]:
    problems: list[str] = []
    return read_preview(path, on_problem=problems.append), problems


# -- the two shapes ---------------------------------------------------------------------------


async def test_a_preview_written_by_our_server_reads_as_its_conversation(tmp_path: Path) -> None:
    feed = stub_previews.PreviewFeed(tmp_path)
    feed.start()
    context = RolloutContext(
        rollout_id=ROLLOUT_ID,
        api_key=SECRET_KEY,
        sample_source=MessageSource(CONVERSATION),
        chat_completions_url="http://127.0.0.1:9/v1",
    )
    publisher = feed.publisher(ROLLOUT_ID, context)
    assert publisher is not None
    publisher.observe(RolloutStatus.RUNNING)
    path = tmp_path / ROLLOUT_ID / PREVIEW_FILE
    await eventually(path.exists, "our server's preview")
    await feed.close()

    transcript = read_preview(path)
    assert transcript is not None
    assert transcript.origin == "preview"
    assert (transcript.rollout_id, transcript.status, transcript.turn) == (ROLLOUT_ID, "running", 2)
    assert transcript.preview_version == 1 and not transcript.truncated
    assert transcript.updated_at is not None and transcript.updated_at.tzinfo is not None
    assert [(s.role, s.source, s.step_id) for s in transcript.steps] == [
        ("system", "system", 1),
        ("user", "user", 2),
        ("assistant", "agent", 3),
        ("tool", "environment", 4),
        ("assistant", "agent", 5),
    ]
    assert transcript.steps[1].text == "What is 6 * 7? My key is [REDACTED]"  # the server's mask
    assert transcript.steps[2].text == ""
    assert transcript.steps[2].tool_calls == (ToolCall("multiply", '{"a": 6, "b": 7}', "call_1"),)
    assert [s.text for s in transcript.steps[3:]] == ["42", "42"]


def test_an_official_preview_reads_as_its_conversation(tmp_path: Path) -> None:
    transcript = read_preview(write(tmp_path / PREVIEW_FILE, OFFICIAL))
    assert transcript == Transcript(
        origin="preview",
        preview_version=3,
        updated_at=datetime(2026, 3, 1, 12, 0, 3, 500000, tzinfo=timezone.utc),
        status="running",
        turn=2,
        truncated=False,
        rollout_id=ROLLOUT_ID,
        steps=(
            TranscriptStep("system", "system", "You are a careful calculator.", step_id=1),
            TranscriptStep("user", "user", "What is 6 * 7?\n[image]", step_id=2),
            TranscriptStep(
                "assistant",
                "agent",
                "Let me multiply.",
                reasoning="6 * 7 is a product",
                tool_calls=(ToolCall("multiply", '{"a": 6, "b": 7}', "call_1"),),
                tool_results=(ToolResult("42", "call_1"),),
                step_id=3,
            ),
            TranscriptStep("assistant", "agent", "42"),
        ),
    )


def test_the_servers_truncated_mark_is_read(tmp_path: Path) -> None:
    document = json.loads(json.dumps(OFFICIAL))
    document["extra"]["osmosis"]["truncated"] = True
    transcript = read_preview(write(tmp_path / PREVIEW_FILE, document))
    assert transcript is not None and transcript.truncated


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({}, (None, None, None, None, False)),
        (
            {"turn": True, "preview_version": "3", "status": 7, "truncated": "yes"},
            (None, None, None, None, False),
        ),
        ({"turn": -1, "preview_version": 2.0, "updated_at": "yesterday"}, (None,) * 4 + (False,)),
        (
            {"updated_at": "2026-03-01T12:00:00Z", "turn": 0, "preview_version": 1},
            (1, datetime(2026, 3, 1, 12, tzinfo=timezone.utc), None, 0, False),
        ),
    ],
)
def test_metadata_of_the_wrong_type_is_left_out(
    tmp_path: Path, metadata: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    transcript = read_preview(
        write(
            tmp_path / PREVIEW_FILE, {"steps": [{"source": "user"}], "extra": {"osmosis": metadata}}
        )
    )
    assert transcript is not None
    assert (
        transcript.preview_version,
        transcript.updated_at,
        transcript.status,
        transcript.turn,
        transcript.truncated,
    ) == expected


def test_steps_of_any_shape_are_read_as_far_as_they_go(tmp_path: Path) -> None:
    document = {
        "steps": [
            1,
            "text",
            {},
            {"source": 5, "message": {"weird": [1, 2]}},
            {"source": "agent", "message": 42, "tool_calls": [3, {"arguments": None}]},
            {"source": "agent", "tool_calls": "many", "observation": {"results": [1, {}]}},
            {"source": "narrator", "message": [{"type": "image_url", "image_url": {}}, 7]},
        ],
        "extra": "none",
    }
    transcript = read_preview(write(tmp_path / PREVIEW_FILE, document))
    assert transcript is not None
    assert [(s.role, s.text) for s in transcript.steps] == [
        ("?", '{"weird": [1, 2]}'),
        ("assistant", "42"),
        ("assistant", ""),
        ("narrator", "[image]\n7"),
    ]
    assert transcript.steps[1].tool_calls == (ToolCall("?", ""),)
    assert transcript.steps[2].tool_results == (ToolResult(""),)


def test_long_texts_and_many_steps_are_bounded_and_marked(tmp_path: Path) -> None:
    steps = [{"source": "user", "message": f"m{n}"} for n in range(MAX_PREVIEW_STEPS + 5)]
    steps[-1]["message"] = "x" * (MAX_PREVIEW_TEXT_CHARS + 10)
    transcript = read_preview(write(tmp_path / PREVIEW_FILE, {"steps": steps}))
    assert transcript is not None and transcript.truncated
    assert len(transcript.steps) == MAX_PREVIEW_STEPS
    assert transcript.steps[0].text == "m5"
    assert len(transcript.steps[-1].text) < MAX_PREVIEW_TEXT_CHARS + 10


# -- files that hold no transcript ------------------------------------------------------------


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _symlink(path: Path) -> None:
    target = write(path.with_name("elsewhere.json"), OFFICIAL)
    path.symlink_to(target)


def _huge(path: Path) -> None:
    with path.open("wb") as stream:  # sparse: as large as that, without the disk it takes
        stream.truncate(MAX_READ_BYTES + 1)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda path: None, "no preview yet"),
        (lambda path: path.write_bytes(b""), "empty"),
        (lambda path: path.write_bytes(json.dumps(OFFICIAL).encode()[:300]), "not JSON"),
        (lambda path: path.write_bytes(b"\xff\xfe{}"), "not UTF-8"),
        (lambda path: path.write_bytes(b"[" * 100_000 + b"]" * 100_000), "nested too deeply"),
        (lambda path: path.write_text("[1, 2]"), "no list of steps"),
        (lambda path: path.write_text('{"steps": {}}'), "no list of steps"),
        (lambda path: path.mkdir(), "not a regular file"),
        (_fifo, "not a regular file"),
        (_symlink, "cannot open"),
        (_huge, "too large"),
    ],
    ids=[
        "missing",
        "empty",
        "half-written",
        "binary",
        "deep",
        "a-list",
        "steps-not-a-list",
        "a-folder",
        "a-fifo",
        "a-symlink",
        "huge",
    ],
)
def test_a_file_without_a_transcript_gives_none_and_says_why(
    tmp_path: Path, make: Callable[[Path], object], problem: str
) -> None:
    path = tmp_path / PREVIEW_FILE
    make(path)
    transcript, problems = read_or_problem(path)
    assert transcript is None
    assert len(problems) == 1 and problem in problems[0], problems
    assert read_preview(path) is None  # without a listener, too


def test_a_file_a_little_over_the_protocols_bound_is_still_read(tmp_path: Path) -> None:
    document = json.loads(json.dumps(OFFICIAL))
    document["steps"][0]["message"] = " " * (MAX_PREVIEW_BYTES + 1024)
    transcript = read_preview(write(tmp_path / PREVIEW_FILE, document))
    assert transcript is not None and transcript.steps[0].text.startswith(" ")


@pytest.mark.parametrize("rollout_id", ["../x", "a/b", "", ".hidden", "x" * 257, "a\x00b"])
def test_no_preview_path_for_an_id_no_server_writes_one_for(rollout_id: str) -> None:
    assert preview_path(Path("/previews"), rollout_id) is None


def test_the_preview_path_of_a_rollout() -> None:
    assert preview_path(Path("/p"), "ab.c:1-2_3") == Path("/p/ab.c:1-2_3/preview.json")


# -- the final sample -------------------------------------------------------------------------


def test_a_final_sample_reads_as_its_conversation() -> None:
    messages = [
        *CONVERSATION,
        {"role": "assistant", "content": [{"type": "text", "text": "done"}], "reasoning": "ok"},
    ]
    transcript = transcript_of_sample(RolloutSample(messages=messages), status="success")
    assert (transcript.origin, transcript.status, transcript.turn) == ("sample", "success", 3)
    assert (transcript.preview_version, transcript.updated_at, transcript.truncated) == (
        None,
        None,
        False,
    )
    assert [(s.role, s.step_id) for s in transcript.steps] == [
        ("system", 1),
        ("user", 2),
        ("assistant", 3),
        ("tool", 4),
        ("assistant", 5),
        ("assistant", 6),
    ]
    assert transcript.steps[1].text == f"What is 6 * 7? My key is {SECRET_KEY}"  # masked later
    assert transcript.steps[2].tool_calls == (ToolCall("multiply", '{"a": 6, "b": 7}', "call_1"),)
    assert transcript.steps[3].call_id == "call_1"
    assert (transcript.steps[5].text, transcript.steps[5].reasoning) == ("done", "ok")


def test_a_long_sample_keeps_its_latest_messages_numbered_in_the_whole() -> None:
    messages = [{"role": "assistant", "content": f"m{n}"} for n in range(MAX_PREVIEW_STEPS + 20)]
    transcript = transcript_of_sample(RolloutSample(messages=messages))
    assert transcript.truncated and transcript.turn == MAX_PREVIEW_STEPS + 20
    assert len(transcript.steps) == MAX_PREVIEW_STEPS
    assert (transcript.steps[0].text, transcript.steps[0].step_id) == ("m20", 21)


def test_messages_nested_hundreds_deep_read_to_the_bound(tmp_path: Path) -> None:
    """Issue 30: a preview's step, a tool's answer and a sample's message holding items nested
    600 deep (a JSON document Python still parses) read as far as the bound, then the mark."""
    deep = nested_items(600)
    step = {"source": "agent", "message": deep, "observation": {"results": [{"content": deep}]}}
    path = write(tmp_path / PREVIEW_FILE, {"steps": [step, {"source": "user", "message": "hi"}]})
    transcript, problems = read_or_problem(path)
    assert transcript is not None, problems
    assert transcript.steps[0].text == NESTED_TOO_DEEPLY
    assert transcript.steps[0].tool_results[0].text == NESTED_TOO_DEEPLY
    assert transcript.steps[1].text == "hi"
    messages = [{"role": "user", "content": nested_items_text(350)}]
    sample = transcript_of_sample(RolloutSample(messages=messages))
    assert sample.steps[0].text == NESTED_TOO_DEEPLY


# -- following the file -----------------------------------------------------------------------


def _replace(path: Path, document: Any) -> None:
    """As the servers do: a new file, renamed over the old one."""
    temporary = path.with_name(".preview.tmp")
    write(temporary, document)
    os.replace(temporary, path)


def _version(version: int, text: str = "hello") -> dict[str, Any]:
    return {
        "steps": [{"source": "user", "message": text}],
        "extra": {"osmosis": {"preview_version": version, "status": "running"}},
    }


def test_a_watcher_reads_the_file_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[Path] = []
    real = transcript_module.read_preview

    def counting(path: Path, **options: Any) -> Transcript | None:
        reads.append(path)
        return real(path, **options)

    monkeypatch.setattr(transcript_module, "read_preview", counting)
    path = tmp_path / ROLLOUT_ID / PREVIEW_FILE
    watcher = PreviewWatcher(path)
    assert watcher.poll() and watcher.problem == "no preview yet" and watcher.transcript is None
    assert not watcher.poll()

    _replace(path, _version(1))
    assert watcher.poll() and watcher.problem is None
    assert watcher.transcript is not None and watcher.transcript.preview_version == 1
    assert not watcher.poll() and len(reads) == 1  # unchanged: not read again

    first = watcher.transcript
    _replace(path, _version(1))  # the same preview in a new file: read, but no change
    assert not watcher.poll() and watcher.transcript is first and len(reads) == 2

    _replace(path, _version(2, "hello again"))
    assert watcher.poll() and watcher.transcript.steps[0].text == "hello again"


def test_a_watcher_keeps_the_last_preview_when_the_file_goes_bad(tmp_path: Path) -> None:
    path = tmp_path / PREVIEW_FILE
    _replace(path, _version(4))
    watcher = PreviewWatcher(path)
    assert watcher.poll()
    shown = watcher.transcript
    path.write_text('{"steps": [')
    assert watcher.poll() and watcher.transcript is shown
    assert watcher.problem is not None and "not JSON" in watcher.problem
    path.unlink()
    assert watcher.poll() and watcher.problem == "no preview yet" and watcher.transcript is shown
    _replace(path, _version(4))
    assert watcher.poll() and watcher.problem is None  # the problem is over: a change too
