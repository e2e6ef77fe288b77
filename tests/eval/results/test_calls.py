"""calls.jsonl read back by the module that writes it: what `CallLog` appends, `read_calls`
returns, and a line that is no call is said, not played."""

from __future__ import annotations

from pathlib import Path

from core.eval.results.calls import CallLog, ModelCall, read_calls


def _finished(call_id: int, started: float, latency: float) -> ModelCall:
    return ModelCall(
        call_id=call_id,
        rollout_id=f"r{call_id}",
        streamed=call_id % 2 == 0,
        requested_model="m",
        started_at=1_700_000_000.0 + started,
        started_monotonic=100.0 + started,
        request_text="question",
        ended_at=1_700_000_000.0 + started + latency,
        ended_monotonic=100.0 + started + latency,
        status=200,
        upstream_status=200,
        prompt_tokens=5,
        completion_tokens=3,
        total_tokens=8,
        reply_text="answer",
        cost_usd=0.25,
    )


def test_what_the_call_log_writes_reads_back_as_the_same_calls(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    calls = [_finished(1, 0.5, 1.25), _finished(2, 2.0, 0.5)]
    with CallLog(path, origin=100.0) as log:
        for call in calls:
            log.append(call)
    warnings: list[str] = []
    read = list(read_calls(path, warnings.append))
    assert warnings == []
    # Monotonic times come back counted from the session's start (the log's origin).
    assert read == [_shifted(call, -100.0) for call in calls], (
        "every field the log writes is read back"
    )


def _shifted(call: ModelCall, by: float) -> ModelCall:
    assert call.ended_monotonic is not None
    return ModelCall(
        **{
            **call.__dict__,
            "started_monotonic": call.started_monotonic + by,
            "ended_monotonic": call.ended_monotonic + by,
        }
    )


def test_a_line_that_is_no_call_is_said_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    with CallLog(path, origin=100.0) as log:
        log.append(_finished(1, 0.0, 1.0))
    with path.open("a") as stream:
        stream.write('{"kind": "model_call", "call_id": "x"}\n[1, 2]\n\n')
    warnings: list[str] = []
    assert [call.call_id for call in read_calls(path, warnings.append)] == [1]
    assert warnings == [
        f"{path}:2: skipped a line that is not a model call (no call_id, rollout_id and t)",
        f"{path}:3: skipped a line that is not a model call (not a JSON object)",
    ]


def test_a_call_as_started_keeps_nothing_of_its_end() -> None:
    started = _finished(1, 0.0, 1.0).as_started()
    assert started.in_flight and started.status is None and started.reply_text is None
    assert started.request_text == "question", "what was asked is known at the start"
