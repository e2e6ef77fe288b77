"""`transitions.jsonl` of an eval run (EVAL.md §6, §8): every observed status change, and what
the user did in the run.

Diagnostic, buffered, read by `osmosis-tui replay`. Every line is a JSON object with a `kind`
and `t` (seconds since the session started, rounded to the millisecond); keys whose value
would be null are left out:

- `{"kind": "session", "t": 0.0, "started_at": ISO-8601 UTC}`: first line written by each
  process that opens the log. A resumed run appends a new session, and `t` restarts at 0
  there, so a reader groups lines by session.
- `{"kind": "status", "rollout_id", "row_index"?, "run_index"?, "source_row_index"?, "status",
  "t", "source", "grade"?, "server_time"?, "event_sequence"?, "server_id"?, "sent_t"?,
  "server_url"?}`: a status
  change (`queued`, `running`, `grading`, `success`, `failure`, `cancelled`, `unknown`, or
  whatever the server reported) as one source saw it. `source` `poll`: a poll of the result
  endpoint saw it at `t`. `source` `server`: the server's ownership event (PROTOCOL.md §8.1)
  reported it; `server_time` is the server's clock (ISO-8601 UTC), `t` the same instant on ours
  (never later than the event's arrival), `event_sequence` and `server_id` as published. A status
  both sources saw has a line from each. `grade` (whether grading was asked for) is on a rollout's
  first line, and so is `sent_t`, when its `POST /rollout` was sent (the client's wait for
  admission, 429 retries included, is `t − sent_t`; older logs lack it), and `server_url`, the
  server it was sent to (older logs lack it too). A line without `kind` is
  read as this one, one without `source` as a poll's (logs of older versions). A rollout that
  nobody in the session sent (`osmosis-tui watch`) has `reported_by` on each of its lines:
  `{"server_id", "server_name"?, "namespace"?, "run_id"?, "run_name"?}`, as its server's events
  named it and its caller; its lines are all the server's, its terminal status included.
- `{"kind": "cancel_request", "rollout_id", "row_index"?, "run_index"?, "source_row_index"?, "t",
  "disposition"?, "error"?, "reply_t"?}`: a cancel was requested at `t`. Written when it is
  asked for, then once more when the server answered: the same line with `disposition`
  (`cancelled_queued`, `cancelled_running`, `not_found`) or `error` (a failed request) and
  `reply_t`, when the answer came. The last line per rollout and `t` is the latest word;
  logs of older versions hold only the answered line, without `reply_t`.
- `{"kind": "not_admitted", "rollout_id", "row_index"?, "run_index"?, "source_row_index"?,
  "t", "error"}`: the rollout was sent at `t` and its server never admitted it (refused, a
  protocol error, no answer in time); `error` says why, with secrets masked. A work item's
  is journaled as its failure (or sent again, when its server was lost).
- `{"kind": "untrack", "rollout_id", "row_index"?, "run_index"?, "t"}`: the run stopped
  following the rollout at `t` (the dashboard's `x`, an interrupt that leaves the rollouts in
  flight to their leases, a rollout that did not end after its cancel); the server keeps it
  until its lease ends.
- `{"kind": "manual", "rollout_id", "row_index"?, "rerun_of"?, "t"}`: a rollout sent by hand
  from the dashboard (a new one; a re-run of `rerun_of`, keeping its row), written once the
  server admitted it, after the status lines it had by then. It is no work item's attempt:
  never in events.jsonl, nor in the progress.
- `{"kind": "requeue", "rollout_id", "new_rollout_id", "row_index", "run_index", "t"}`: the
  work item of `rollout_id` runs again under `new_rollout_id`: the old one is cancelled (its
  `cancel_request` lines follow) and its outcome is not the item's; the new one's status
  lines follow once dispatch sends it (a run that ends first never does). Additive `reason`:
  `rule` when the --requeue-stuck rule asked; `hedge` when --hedge-after sent the item a
  second time while `rollout_id` goes on (the first of the two to finish is the item's
  result, the other is cancelled).
- `{"kind": "dispatch", "max_in_flight", "t"}`: the run began sending work items, at most
  `max_in_flight` at once (what `control` lines change later).
- `{"kind": "control", "action", "value"?, "server"?, "t"}`: the run's dispatch was steered:
  `action` `pause` (no new work item is sent; those in flight go on), `resume`,
  `max_in_flight` with the limit set as `value` (within the servers' capacity), or `drain`
  (no new work item is sent to the server at `server`; those in flight there go on) and
  `undrain`.

`row_index` and `run_index` name the work item as the journal does (`row_index`: the position
among the selected rows), absent only for a rollout sent by hand (a re-run has the
`row_index` of the rollout it repeats); `source_row_index` is the dataset's own row, the one
a replay shows (logs of older versions lack it).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any

from core.eval.results.durable import (
    AppendFile,
    WarningSink,
    describe_os_error,
    json_line,
    open_append,
    write_all,
)
from core.eval.results.records import iso_utc
from core.eval.untrusted_json import is_finite, load_record
from core.regular_file import MAX_LINE_BYTES, read_lines

logger = logging.getLogger(__name__)


def _log_warning(message: str) -> None:
    logger.warning("%s", message)


def _plain(value: Any) -> Any:
    # Status enums (RolloutStatus, CancelDisposition) are written as their values.
    return value.value if isinstance(value, Enum) else value


class TransitionLog(AppendFile):
    """`transitions.jsonl`: every observed status change, for the dashboard replay.

    Diagnostic, so not fsync'd: lines are buffered in memory and written by a background
    thread at least every `flush_interval_s`, and at `close`. A SIGKILL loses at most that
    much and may leave a torn last line, which `read_transitions` skips and the next
    `TransitionLog` on the file cuts off before appending.
    """

    _fd: int  # open until the run ends; close() flushes first

    def __init__(
        self,
        path: Path,
        *,
        started_at: float | None = None,
        flush_interval_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`started_at` is the session start on `clock` (default: now); `t` counts from it."""
        self.path = path
        self._clock = clock
        self.started_at = clock() if started_at is None else started_at
        self._fd = open_append(path, read=True)
        try:
            _cut_unterminated_tail(self._fd)
        except BaseException:
            os.close(self._fd)
            raise
        self._lock = threading.Lock()
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._closed = False
        #: The first write failure (a full or read-only disk): later lines are dropped.
        self.error: OSError | None = None
        self._interval = flush_interval_s
        self._stop = threading.Event()
        self._write({"kind": "session", "t": 0.0, "started_at": iso_utc()})
        self._flusher = threading.Thread(
            target=self._flush_periodically, name="transitions-flush", daemon=True
        )
        self._flusher.start()

    def elapsed(self, at: float | None = None) -> float:
        """Seconds from the session start to `at` (a `clock` reading; default: now)."""
        return (self._clock() if at is None else at) - self.started_at

    def record(
        self,
        rollout_id: str,
        row_index: int | None,
        run_index: int | None,
        status: str,
        t: float,
        *,
        source: str = "poll",
        source_row_index: int | None = None,
        grade: bool | None = None,
        server_time: float | None = None,
        event_sequence: int | None = None,
        server_id: str | None = None,
        sent_t: float | None = None,
        server_url: str | None = None,
        reported_by: dict[str, str] | None = None,
    ) -> None:
        """A status change of one rollout as `source` saw it, at `t` seconds since the
        session start; `server_time` (seconds since the epoch), `event_sequence` and
        `server_id` for a server's report; `reported_by` for a rollout nobody in the session
        sent (its server and caller, as its events name them).

        `grade` (whether grading was asked for) goes on a rollout's first record, so that a
        replay can tell a grading phase that was not requested from one that was missed;
        `sent_t` too (when its admission was asked for), so that it can tell the client's
        wait for admission, and `server_url` (the server it was sent to).
        """
        self._write(
            {
                "kind": "status",
                "rollout_id": rollout_id,
                "row_index": row_index,
                "run_index": run_index,
                "source_row_index": source_row_index,
                "status": _plain(status),
                "t": t,
                "source": source,
                "grade": grade,
                "server_time": (
                    None
                    if server_time is None
                    else iso_utc(datetime.fromtimestamp(server_time, timezone.utc))
                ),
                "event_sequence": event_sequence,
                "server_id": server_id,
                "sent_t": None if sent_t is None else round(sent_t, 3),
                "server_url": server_url,
                "reported_by": reported_by,
            }
        )

    def cancel_request(
        self,
        rollout_id: str,
        row_index: int | None,
        run_index: int | None,
        *,
        t: float,
        source_row_index: int | None = None,
        disposition: str | None = None,
        error: str | None = None,
        reply_t: float | None = None,
    ) -> None:
        """A cancel asked for at `t`; once answered, `disposition` is the server's answer,
        `error` a failed request, and `reply_t` when either came."""
        self._write(
            {
                "kind": "cancel_request",
                "rollout_id": rollout_id,
                "row_index": row_index,
                "run_index": run_index,
                "source_row_index": source_row_index,
                "t": t,
                "disposition": _plain(disposition),
                "error": error,
                "reply_t": None if reply_t is None else round(reply_t, 3),
            }
        )

    def not_admitted(
        self,
        rollout_id: str,
        row_index: int | None,
        run_index: int | None,
        *,
        t: float,
        error: str,
        source_row_index: int | None = None,
        server_url: str | None = None,
    ) -> None:
        """A rollout sent at `t` to the server at `server_url` that never admitted it, and
        why."""
        self._write(
            {
                "kind": "not_admitted",
                "rollout_id": rollout_id,
                "row_index": row_index,
                "run_index": run_index,
                "source_row_index": source_row_index,
                "t": t,
                "error": error,
                "server_url": server_url,
            }
        )

    def untrack(
        self, rollout_id: str, row_index: int | None, run_index: int | None, *, t: float
    ) -> None:
        """The run stopped following a rollout at `t`."""
        self._write(
            {
                "kind": "untrack",
                "rollout_id": rollout_id,
                "row_index": row_index,
                "run_index": run_index,
                "t": t,
            }
        )

    def manual(
        self, rollout_id: str, row_index: int | None, *, t: float, rerun_of: str | None = None
    ) -> None:
        """A rollout sent by hand at `t` (a re-run of `rerun_of`)."""
        self._write(
            {
                "kind": "manual",
                "rollout_id": rollout_id,
                "row_index": row_index,
                "rerun_of": rerun_of,
                "t": t,
            }
        )

    def requeue(
        self,
        rollout_id: str,
        new_rollout_id: str,
        row_index: int | None,
        run_index: int | None,
        *,
        t: float,
        reason: str | None = None,
    ) -> None:
        """At `t`, the work item of `rollout_id` was given `new_rollout_id` to run again
        (`reason`: "rule", "hedge", or None for a person's requeue)."""
        line: dict[str, Any] = {
            "kind": "requeue",
            "rollout_id": rollout_id,
            "new_rollout_id": new_rollout_id,
            "row_index": row_index,
            "run_index": run_index,
            "t": t,
        }
        if reason is not None:
            line["reason"] = reason
        self._write(line)

    def dispatch(self, max_in_flight: int, *, t: float) -> None:
        """The run began sending work items at `t`, at most `max_in_flight` at once."""
        self._write({"kind": "dispatch", "max_in_flight": max_in_flight, "t": t})

    def control(
        self, action: str, *, t: float, value: int | None = None, server: str | None = None
    ) -> None:
        """The dispatch was steered at `t`: `pause`, `resume`, `max_in_flight` = `value`, or
        `drain`/`undrain` of the server at `server`."""
        self._write({"kind": "control", "action": action, "value": value, "server": server, "t": t})

    def _write(self, record: dict[str, Any]) -> None:
        record["t"] = round(float(record["t"]), 3)
        line = json_line({key: value for key, value in record.items() if value is not None})
        with self._lock:
            if self._closed:
                return  # a late observer after the run ended: nothing to keep it for
            self._buffer.append(line)
            self._buffered += len(line)
            if self._buffered >= 1 << 16:
                self._flush_locked()

    def _flush_locked(self) -> None:
        if self._buffer:
            data = b"".join(self._buffer)
            self._buffer.clear()
            self._buffered = 0
            if self.error is not None:
                return  # the file is diagnostic: after a failed write, lines are dropped
            try:
                write_all(self._fd, data)
            except OSError as exc:
                self.error = exc
                logger.warning(
                    "writing %s failed; transitions are no longer recorded: %s",
                    self.path,
                    describe_os_error(exc),
                )

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._flush_locked()

    def _flush_periodically(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.flush()
            except OSError:
                logger.exception("writing %s failed", self.path)

    def close(self) -> None:
        self._stop.set()
        self._flusher.join()
        with self._lock:
            if self._closed:
                return
            try:
                self._flush_locked()
            finally:
                self._closed = True
                os.close(self._fd)


def _cut_unterminated_tail(fd: int) -> None:
    """Truncate the file behind `fd` to just past its last newline."""
    size = os.fstat(fd).st_size
    position = size
    while position > 0:
        start = max(0, position - 4096)
        chunk = os.pread(fd, position - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            cut = start + newline + 1
            break
        position = start
    else:
        cut = 0
    if cut < size:
        os.ftruncate(fd, cut)


def read_transitions(
    path: Path, *, on_warning: WarningSink | None = None
) -> Iterator[dict[str, Any]]:
    """The records of `transitions.jsonl` in file order, each with `kind` and `t`; `OSError`
    here when the file cannot be read (`core.regular_file.read_lines`).

    A torn last line (no newline) is dropped quietly, as it is the expected result of a
    crash; other lines that are not records are skipped with a warning, among them one whose
    `t` (or `reply_t`) is no finite number (`Infinity`, `NaN`, `1e400`): no writer of ours
    makes one, and a reader would have to place it on a timeline.
    """
    warn = on_warning or _log_warning
    # Opened (and refused: a FIFO, a symlink) here, streamed below: a line at most
    # MAX_LINE_BYTES long is kept, a longer one skipped.
    lines = read_lines(path)

    def records() -> Iterator[dict[str, Any]]:
        for line in lines:
            number, raw = line.number, line.data
            if not line.ended:
                return
            if raw is None:
                warn(f"{path}:{number}: skipped a line longer than {MAX_LINE_BYTES:,} bytes")
                continue
            if not raw.strip():
                continue
            try:
                record = load_record(raw)
            except ValueError as exc:
                warn(f"{path}:{number}: skipped an invalid line ({exc})")
                continue
            if not isinstance(record, dict):
                warn(f"{path}:{number}: skipped a line that is not a JSON object")
                continue
            record.setdefault("kind", "status")
            t = record.get("t")
            if (
                not isinstance(record["kind"], str)
                or isinstance(t, bool)
                or not isinstance(t, (int, float))
            ):
                warn(f"{path}:{number}: skipped a record without a kind and a time")
                continue
            unplaceable = [
                name
                for name in ("t", "reply_t")
                if name in record and record[name] is not None and not is_finite(record[name])
            ]
            if unplaceable:
                warn(
                    f"{path}:{number}: skipped a record whose {unplaceable[0]} is no finite number"
                )
                continue
            yield record

    return records()


__all__ = ["TransitionLog", "read_transitions"]
