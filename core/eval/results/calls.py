"""One record per model call through the gateway, and `calls.jsonl`, the file that keeps them.

The gateway makes a `ModelCall` when a rollout's request arrives (the call is in flight:
`ended_at` is None) and a finished copy when the answer is ready; it hands both to its hooks
(`on_call_start`, `on_call_end`), so the board can show a call in flight and for how long, and
`CallLog.append` can write the finished ones (the eval session's `on_call_end` does both).
Texts in a record are redacted before they are bounded (so a secret is never cut into a
recognisable prefix) and hold at most `TEXT_LIMIT` characters.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core.eval.results.durable import (
    AppendFile,
    WarningSink,
    json_line,
    open_append,
    write_all,
)
from core.eval.results.records import iso_utc
from core.eval.untrusted_json import epoch_seconds, int_of, is_number, load_record, text_of
from core.regular_file import MAX_LINE_BYTES, read_lines

logger = logging.getLogger(__name__)

#: The most characters a record keeps of the request's last message and of the reply.
TEXT_LIMIT = 2000

CallHook = Callable[["ModelCall"], None]
"""What `on_call_start` and `on_call_end` hooks are called with: the call as it is then."""


def bounded(text: str, limit: int = TEXT_LIMIT) -> str:
    """`text`, cut to `limit` characters with an ellipsis when it is longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class ModelCall:
    """One chat-completions call a rollout made through the gateway."""

    call_id: int
    """1, 2, ... in the order the gateway received the calls."""
    rollout_id: str
    streamed: bool
    """The rollout asked for `stream: true` (the upstream call itself never streams)."""
    requested_model: str
    """The model name the rollout sent (echoed in the answer; it does not choose the model)."""
    started_at: float
    """Wall-clock start, seconds since the epoch."""
    started_monotonic: float
    """`time.monotonic()` at the start: in-flight durations and latencies count from it."""
    request_text: str
    """The request's last message, redacted and bounded."""
    ended_at: float | None = None
    """Wall-clock end; None while the call is in flight."""
    ended_monotonic: float | None = None
    status: int | None = None
    """The status the gateway answered with (an error streamed after a 200 counts as its
    error status); None when the call was abandoned (the rollout went away, the gateway
    stopped)."""
    upstream_status: int | None = None
    """The upstream's own HTTP status; None when it never answered."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reply_text: str | None = None
    """The reply's text (or its tool calls' names), redacted and bounded."""
    error: str | None = None
    """Why the call failed, redacted."""
    cost_usd: float | None = None
    """The call's price when LiteLLM knows the model's; None otherwise."""

    @property
    def in_flight(self) -> bool:
        return self.ended_monotonic is None

    @property
    def latency_sec(self) -> float | None:
        if self.ended_monotonic is None:
            return None
        return self.ended_monotonic - self.started_monotonic

    def elapsed(self, now: float | None = None) -> float:
        """Seconds since the start: until `now` (a monotonic reading) while in flight."""
        if self.ended_monotonic is not None:
            return self.ended_monotonic - self.started_monotonic
        return (time.monotonic() if now is None else now) - self.started_monotonic

    def to_record(self, origin: float | None = None) -> dict[str, Any]:
        """The call as a JSON object; with `origin` (a monotonic reading of the session
        start) also `t`, the start in seconds since then, as `transitions.jsonl` counts."""
        latency = self.latency_sec
        record: dict[str, Any] = {
            "kind": "model_call",
            "call_id": self.call_id,
            "rollout_id": self.rollout_id,
            "t": None if origin is None else round(self.started_monotonic - origin, 3),
            "started_at": iso_utc(datetime.fromtimestamp(self.started_at, timezone.utc)),
            "ended_at": (
                None
                if self.ended_at is None
                else iso_utc(datetime.fromtimestamp(self.ended_at, timezone.utc))
            ),
            "latency_s": None if latency is None else round(latency, 3),
            "status": self.status,
            "upstream_status": self.upstream_status,
            "streamed": self.streamed,
            "model": self.requested_model,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost_usd,
            "request": self.request_text,
            "reply": self.reply_text,
            "error": self.error,
        }
        return {key: value for key, value in record.items() if value is not None}

    @classmethod
    def from_record(cls, line: object) -> ModelCall:
        """The finished call a calls.jsonl line records (what `to_record` wrote); its
        monotonic times count from its session's start. ValueError for a line that is none."""
        if not isinstance(line, dict):
            raise ValueError("not a JSON object")
        call_id, rollout_id, t = int_of(line.get("call_id")), line.get("rollout_id"), line.get("t")
        if call_id is None or not isinstance(rollout_id, str) or not is_number(t):
            raise ValueError("no call_id, rollout_id and t")
        latency = line.get("latency_s")
        latency = float(latency) if is_number(latency) else 0.0
        started_at = epoch_seconds(line.get("started_at")) or 0.0
        cost = line.get("cost_usd")
        return cls(
            call_id=call_id,
            rollout_id=rollout_id,
            streamed=line.get("streamed") is True,
            requested_model=text_of(line.get("model")) or "",
            started_at=started_at,
            started_monotonic=float(t),
            request_text=text_of(line.get("request")) or "",
            ended_at=epoch_seconds(line.get("ended_at")) or started_at + latency,
            ended_monotonic=float(t) + latency,
            status=int_of(line.get("status")),
            upstream_status=int_of(line.get("upstream_status")),
            prompt_tokens=int_of(line.get("prompt_tokens")),
            completion_tokens=int_of(line.get("completion_tokens")),
            total_tokens=int_of(line.get("total_tokens")),
            reply_text=text_of(line.get("reply")),
            error=text_of(line.get("error")),
            cost_usd=float(cost) if is_number(cost) else None,
        )

    def as_started(self) -> ModelCall:
        """This call as it was while it waited for the model: nothing of its end known yet."""
        return replace(
            self,
            ended_at=None,
            ended_monotonic=None,
            status=None,
            upstream_status=None,
            prompt_tokens=None,
            completion_tokens=None,
            total_tokens=None,
            reply_text=None,
            error=None,
            cost_usd=None,
        )


class CallLog(AppendFile):
    """`calls.jsonl`: one JSON line per finished call, appended as the call ends.

    Diagnostic, like `transitions.jsonl`: a line is one `write()` on an `O_APPEND`
    descriptor, not fsync'd; the file is created 0600 (a call's texts are redacted, but
    they are still the user's prompts). After a failed write (a full disk) the error is
    kept in `error` and later lines are dropped, so a broken disk never fails a model call.
    """

    def __init__(self, path: Path, *, origin: float | None = None) -> None:
        """`origin`: the session start on `time.monotonic()`, for each line's `t`."""
        self.path = path
        self.origin = origin
        self.error: OSError | None = None
        self._fd = open_append(path)
        self._lock = threading.Lock()

    def append(self, call: ModelCall) -> None:
        """Write `call` (usable as an `on_call_end` hook); a call in flight is skipped."""
        if self._fd is None or self.error is not None or call.in_flight:
            return
        line = json_line(call.to_record(self.origin))
        try:
            write_all(self._fd, line)
        except OSError as exc:
            self.error = exc
            logger.warning(
                "writing %s failed; model calls are no longer recorded: %s", self.path, exc
            )


def read_calls(path: Path, on_warning: WarningSink) -> Iterator[ModelCall]:
    """The calls `CallLog` wrote to `path`, in file order (the order they ended); a line
    that is not one is skipped with a warning, and an unreadable file (`read_lines`: a FIFO,
    a symlink) is one warning."""
    try:
        lines = read_lines(path)
    except OSError as exc:
        on_warning(f"{path}: not read ({exc.strerror or exc})")
        return
    for line in lines:
        number, raw = line.number, line.data
        if raw is None:
            on_warning(f"{path}:{number}: skipped a line longer than {MAX_LINE_BYTES:,} bytes")
            continue
        if not raw.strip():
            continue
        try:
            call = ModelCall.from_record(load_record(raw))
        except (ValueError, TypeError) as exc:
            on_warning(f"{path}:{number}: skipped a line that is not a model call ({exc})")
            continue
        yield call


__all__ = ["TEXT_LIMIT", "CallHook", "CallLog", "ModelCall", "bounded", "read_calls"]
