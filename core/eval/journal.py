"""The results folder of an eval run and the files in it (EVAL.md §6).

`<output>/<run-name>/` (mode 0700) holds:

- `manifest.json`: `{schema_version: 1, run_name, created_at, inputs}`, written once. `inputs`
  is what a resume must not change (`model_path`, `dataset {sha256, selected_source_rows}`,
  `n`, `rollout`, `timeouts`); see `manifest_inputs`. `RunFolder.open` compares it on resume.
- `events.jsonl` (`Journal`): one `ItemResult.to_json()` object per line, written with one
  `write()` on an `O_APPEND` descriptor and fsync'd before `append` returns. It is the only
  authority for resume; the last record of a `(row_index, run_index)` wins.
- `transitions.jsonl` (`TransitionLog`): diagnostic, buffered, read by `osmosis-tui replay`.
  Every line is a JSON object with a `kind` and `t` (seconds since the session started,
  rounded to the millisecond); keys whose value would be null are left out:

  - `{"kind": "session", "t": 0.0, "started_at": ISO-8601 UTC}`: first line written by each
    process that opens the log. A resumed run appends a new session, and `t` restarts at 0
    there, so a reader groups lines by session.
  - `{"kind": "status", "rollout_id", "row_index", "run_index", "status", "t"}`: an observed
    status change (`queued`, `running`, `grading`, `success`, `failure`, `cancelled`,
    `unknown`, or whatever the server reported). A line without `kind` is read as this one.
  - `{"kind": "admission_retry", "rollout_id", "row_index", "run_index", "t", "attempt",
    "status_code", "delay_s", "server"?}`: the server refused admission (normally 429) and
    the client waits `delay_s` before attempt number `attempt + 1`.
  - `{"kind": "cancel_request", "rollout_id", "row_index", "run_index", "t",
    "disposition"?, "error"?}`: a cancel was requested; `disposition` is the server's answer
    (`cancelled_queued`, `cancelled_running`, `not_found`), `error` a failed request.

- `index.jsonl` (`write_index`): one row per work item, rewritten atomically at the end:
  `row_index, run_index, rollout_id, status, reward, tokens, duration_ms, error_type,
  resumed`. Items without a result have status `pending`; null values are omitted as in the
  journal (readers of the official layout drop lines holding nulls) and `resumed` is always
  a boolean: true when the result was carried over from an earlier session.
- `metrics.json`: written with `write_json_atomic` (see `core.eval.metrics`).
- `logs.txt` (`RunLog`): `<ISO-8601 UTC> [source] message` lines, secrets redacted.

Every file is created with mode 0600. Standard library only, so that the resume path (and
the SIGKILL tests) do not pay for the client stack.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Any

from core.eval.records import ItemKey, ItemResult, WorkItem, iso_utc
from core.eval.redact import Redactor

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
MANIFEST_FILE = "manifest.json"
EVENTS_FILE = "events.jsonl"
TRANSITIONS_FILE = "transitions.jsonl"
INDEX_FILE = "index.jsonl"
METRICS_FILE = "metrics.json"
LOGS_FILE = "logs.txt"
TRIALS_DIR = "rollout_trials"

FILE_MODE = 0o600
FOLDER_MODE = 0o700
RUN_NAME_MAX_LENGTH = 128
RESUME_HINT = "use --fresh to start over, or --name for a new run"

# Receives one human-readable warning (a skipped or dropped journal line, a repair).
WarningSink = Callable[[str], None]


def _log_warning(message: str) -> None:
    logger.warning("%s", message)


# -- errors -----------------------------------------------------------------------------------


class RunFolderError(Exception):
    """The run folder cannot be used as asked: bad input, exit status 2 (EVAL.md §1)."""


class ResumeRefused(RunFolderError):
    """A resume would change inputs the run was started with.

    `changed_keys` are dotted paths into the manifest's `inputs`, e.g. `dataset.sha256`.
    """

    def __init__(self, run_name: str, folder: Path, changed_keys: list[str]) -> None:
        self.run_name = run_name
        self.folder = folder
        self.changed_keys = changed_keys
        super().__init__(
            f"run {run_name!r} ({folder}) was started with different inputs; changed: "
            f"{', '.join(changed_keys)}; {RESUME_HINT}"
        )


# -- small durable-write helpers --------------------------------------------------------------


def _fsync_dir(folder: Path) -> None:
    """Make a create/rename inside `folder` survive a power loss (where the OS allows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # e.g. Windows cannot open a directory; the rename is still atomic
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF, errno.EACCES):
            raise
    finally:
        os.close(fd)


def _open_append(path: Path, *, read: bool = False) -> int:
    """An `O_APPEND` descriptor on `path`, created 0600 (an older file is narrowed to 0600)."""
    flags = (os.O_RDWR if read else os.O_WRONLY) | os.O_APPEND | os.O_CREAT
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        info = os.fstat(fd)
        # Only a regular file of ours is narrowed: a path that names a device or a pipe
        # (/dev/null, a FIFO a user points us at) is shared, and its mode is not ours to set.
        if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) != FILE_MODE:
            os.chmod(path, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` (mode 0600): readers see the old file or the new, never half."""
    # mkstemp: a unique name (two writers never share a temp file) created 0600.
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


def write_json_atomic(path: Path, obj: Any) -> None:
    """`obj` as indented JSON plus a newline, via `write_bytes_atomic`. NaN is refused."""
    text = json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))


def _json_line(obj: Mapping[str, Any]) -> bytes:
    return (
        json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
    ).encode()


def describe_os_error(exc: OSError) -> str:
    """`[Errno 28] No space left on device: 'path'` without the noise: the reason and path."""
    reason = exc.strerror or str(exc)
    return f"{reason} ({exc.filename})" if exc.filename else reason


# -- run names and the run folder -------------------------------------------------------------

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _timestamp(moment: datetime | None = None) -> str:
    # Local time: the name is read by the person who started the run.
    return (moment or datetime.now()).strftime("%Y%m%d-%H%M%S")


def default_run_name(config_or_dataset_stem: str, *, now: datetime | None = None) -> str:
    """`<stem>-YYYYmmdd-HHMMSS` (local time); the stem is reduced to `[A-Za-z0-9._-]`."""
    stem = _NAME_UNSAFE.sub("-", config_or_dataset_stem).strip(".-") or "eval"
    stem = stem[: RUN_NAME_MAX_LENGTH - 16]
    return f"{stem}-{_timestamp(now)}"


def validate_run_name(name: str) -> str:
    """`name` if it is one safe, visible path segment; else `RunFolderError`."""
    if not name:
        raise RunFolderError("run name must not be empty")
    if len(name) > RUN_NAME_MAX_LENGTH:
        raise RunFolderError(f"run name must be at most {RUN_NAME_MAX_LENGTH} characters")
    if name in (".", "..") or any(c in name for c in "/\\\x00") or Path(name).name != name:
        raise RunFolderError(f"run name {name!r} must be a single path segment")
    if name[0] in ".-":
        # A leading dot hides the folder; a leading dash reads as an option in shells.
        raise RunFolderError(f"run name {name!r} must not start with '.' or '-'")
    if not name.isprintable():
        raise RunFolderError(f"run name {name!r} must not contain control characters")
    return name


def manifest_inputs(
    *,
    model_path: str,
    dataset_sha256: str,
    selected_source_rows: Iterable[int],
    n: int,
    rollout: str,
    agent_timeout_s: float | None,
    grader_timeout_s: float | None,
) -> dict[str, Any]:
    """The manifest's `inputs` in their one canonical shape."""
    return {
        "model_path": model_path,
        "dataset": {"sha256": dataset_sha256, "selected_source_rows": list(selected_source_rows)},
        "n": n,
        "rollout": rollout,
        "timeouts": {"agent_s": agent_timeout_s, "grader_s": grader_timeout_s},
    }


def _changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths where `old` and `new` differ; lists and scalars compare whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        changed: list[str] = []
        for key in sorted(set(old) | set(new)):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old or key not in new:
                changed.append(path)
            else:
                changed.extend(_changed_keys(old[key], new[key], path))
        return changed
    return [] if _same_value(old, new) else [prefix or "inputs"]


def _same_value(old: Any, new: Any) -> bool:
    # 450 and 450.0 are the same timeout; `true` and `1` are not the same input.
    numbers = (int, float)
    if isinstance(old, numbers) and isinstance(new, numbers) and bool not in (type(old), type(new)):
        return old == new
    return type(old) is type(new) and bool(old == new)


def _unique_aside(folder: Path) -> Path:
    base = f"{folder.name}.old-{_timestamp()}"
    candidate = folder.with_name(base)
    suffix = 2
    while candidate.exists() or candidate.is_symlink():
        candidate = folder.with_name(f"{base}-{suffix}")
        suffix += 1
    return candidate


@dataclass(frozen=True)
class RunFolder:
    """An opened `<output>/<run-name>/` folder; `resumed` when it existed with a manifest."""

    path: Path
    run_name: str
    manifest: dict[str, Any]
    resumed: bool
    moved_aside: Path | None = None

    @classmethod
    def open(cls, output: Path, name: str, inputs: Mapping[str, Any], *, fresh: bool) -> RunFolder:
        """Create the run folder, or reopen it for resume.

        Resume requires the stored `inputs` to equal `inputs` (`ResumeRefused` names the
        changed keys). `fresh=True` renames an existing folder to `<name>.old-<timestamp>`
        (never deletes it) and starts clean. A folder that exists without a manifest is
        adopted only when empty (a crash right after mkdir); otherwise it is not ours.
        """
        validate_run_name(name)
        try:
            normalized: dict[str, Any] = json.loads(json.dumps(dict(inputs), allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"run inputs must be JSON data: {exc}") from exc
        try:
            return cls._open(output, name, normalized, fresh=fresh)
        except OSError as exc:
            # A read-only or full disk, or a folder we may not write: said plainly, before
            # any rollout runs.
            raise RunFolderError(
                f"cannot write the results under {output}: {describe_os_error(exc)}"
            ) from exc

    @classmethod
    def _open(
        cls, output: Path, name: str, normalized: dict[str, Any], *, fresh: bool
    ) -> RunFolder:
        output.mkdir(parents=True, exist_ok=True)
        folder = output / name
        moved_aside: Path | None = None
        if fresh and (folder.exists() or folder.is_symlink()):
            moved_aside = _unique_aside(folder)
            os.replace(folder, moved_aside)
            _fsync_dir(output)
        # A symlink to a folder is followed (a run moved to another disk); anything else that
        # holds the name, a dangling link included, is not a run folder.
        dangling = folder.is_symlink() and not folder.exists()
        if dangling or (folder.exists() and not folder.is_dir()):
            raise RunFolderError(f"{folder} exists and is not a run folder; {RESUME_HINT}")
        manifest_path = folder / MANIFEST_FILE
        if folder.is_dir():
            if manifest_path.exists():
                manifest = cls._read_manifest(manifest_path, name)
                changed = _changed_keys(manifest["inputs"], normalized)
                if changed:
                    raise ResumeRefused(name, folder, changed)
                return cls(folder, name, manifest, resumed=True)
            if any(folder.iterdir()):
                raise RunFolderError(
                    f"{folder} exists but has no {MANIFEST_FILE}, so it is not an eval run "
                    f"folder; {RESUME_HINT}"
                )
        else:
            folder.mkdir(mode=FOLDER_MODE)
            _fsync_dir(output)
        # mkdir's mode is narrowed by the umask, never widened; chmod makes it exact.
        os.chmod(folder, FOLDER_MODE)
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "run_name": name,
            "created_at": iso_utc(),
            "inputs": normalized,
        }
        write_json_atomic(manifest_path, manifest)
        return cls(folder, name, manifest, resumed=False, moved_aside=moved_aside)

    @staticmethod
    def _read_manifest(path: Path, name: str) -> dict[str, Any]:
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise RunFolderError(f"{path} cannot be read ({exc}); {RESUME_HINT}") from exc
        if not isinstance(manifest, dict) or not isinstance(manifest.get("inputs"), dict):
            raise RunFolderError(f"{path} is not an eval run manifest; {RESUME_HINT}")
        version = manifest.get("schema_version")
        if version != SCHEMA_VERSION:
            raise RunFolderError(
                f"{path} has schema_version {version!r}, this osmosis-tui reads "
                f"{SCHEMA_VERSION}; {RESUME_HINT}"
            )
        if manifest.get("run_name") != name:
            # A renamed folder still resumes; the manifest keeps the name it was created with.
            logger.info("run folder %s was created as %r", path.parent, manifest.get("run_name"))
        return manifest

    @property
    def created_at(self) -> str:
        return str(self.manifest["created_at"])

    @property
    def inputs(self) -> dict[str, Any]:
        inputs: dict[str, Any] = self.manifest["inputs"]
        return inputs

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_FILE

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS_FILE

    @property
    def transitions_path(self) -> Path:
        return self.path / TRANSITIONS_FILE

    @property
    def index_path(self) -> Path:
        return self.path / INDEX_FILE

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def logs_path(self) -> Path:
        return self.path / LOGS_FILE

    @property
    def trials_dir(self) -> Path:
        """`_OSMOSIS_ROLLOUT_ARTIFACT_ROOT` for a launched rollout server (EVAL.md §5)."""
        return self.path / TRIALS_DIR


# -- events.jsonl -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scan:
    results: dict[ItemKey, ItemResult]
    warnings: list[str]
    # Where the next record must start: just past the last newline, or before a last line
    # that is not JSON. Everything from here on is a torn write.
    good_size: int


def _scan_journal(path: Path, data: bytes) -> _Scan:
    results: dict[ItemKey, ItemResult] = {}
    warnings: list[str] = []
    lines = data.split(b"\n")
    # split() leaves what follows the last newline as the final element: b"" for a clean file.
    tail = lines.pop()
    good_size = len(data) - len(tail)
    if tail:
        # One write() per record ends with the newline, so an unterminated line is a record
        # that never finished (and whose append never returned): dropped even if it parses.
        warnings.append(
            f"{path}: dropped a torn last line ({len(tail)} bytes, no newline): {tail[:60]!r}"
        )
    offset = 0
    for number, raw in enumerate(lines, start=1):
        line_start = offset
        offset += len(raw) + 1
        if not raw.strip():
            continue
        last = number == len(lines) and not tail
        try:
            record = json.loads(raw)
        except ValueError as exc:
            if last:
                warnings.append(f"{path}:{number}: dropped an invalid last line ({exc})")
                good_size = line_start
            else:
                warnings.append(f"{path}:{number}: skipped an invalid line ({exc})")
            continue
        try:
            result = ItemResult.from_json(record)
        except (ValueError, TypeError) as exc:
            # Valid JSON with a shape we do not know (e.g. a newer writer): reported and kept
            # in the file, never truncated away.
            warnings.append(f"{path}:{number}: skipped a record that is not a result ({exc})")
            continue
        # Re-inserting moves the key to the end: iteration order is the order of final records.
        results.pop(result.key, None)
        results[result.key] = result
    return _Scan(results, warnings, good_size)


class Journal:
    """`events.jsonl`: the append-only, fsync'd record of finished work items.

    Safe under SIGKILL at any point: a record is one `write()` on an `O_APPEND` descriptor
    followed by `fsync`, so the file only ever ends with whole records or one unterminated
    fragment, and `open` cuts such a fragment off before the first append.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self._lock = threading.Lock()

    @staticmethod
    def load(path: Path, *, on_warning: WarningSink | None = None) -> dict[ItemKey, ItemResult]:
        """The final result of every journaled item; `{}` when the file does not exist.

        The last record for a key wins. A torn or invalid last line is dropped, an invalid
        line elsewhere is skipped; each is reported to `on_warning` (default: this module's
        logger). Reading never changes the file.
        """
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return {}
        scan = _scan_journal(path, data)
        for warning in scan.warnings:
            (on_warning or _log_warning)(warning)
        return scan.results

    @classmethod
    def open(cls, path: Path, *, on_warning: WarningSink | None = None) -> Journal:
        """Open for appending (creating it 0600), first cutting off a torn tail."""
        created = not path.exists()
        fd = _open_append(path)
        try:
            data = path.read_bytes()
            scan = _scan_journal(path, data)
            if scan.good_size < len(data):
                os.ftruncate(fd, scan.good_size)
                os.fsync(fd)
                (on_warning or _log_warning)(
                    f"{path}: repaired: cut {len(data) - scan.good_size} bytes of a torn last "
                    "line before appending"
                )
        except BaseException:
            os.close(fd)
            raise
        if created:
            _fsync_dir(path.parent)
        return cls(path, fd)

    def append(self, result: ItemResult) -> None:
        """Write `result` as one line and fsync it; when this returns, it survives a crash."""
        line = _json_line(result.to_json())
        with self._lock:
            if self._fd is None:
                raise ValueError(f"{self.path} is closed")
            size = os.fstat(self._fd).st_size
            try:
                _write_all(self._fd, line)
                os.fsync(self._fd)
            except OSError:
                # A full disk may take part of the line: cut it off again, so the file still
                # ends with a whole record (a resume would drop the fragment anyway).
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, size)
                raise

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# -- transitions.jsonl ------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    # Status enums (RolloutStatus, CancelDisposition) are written as their values.
    return value.value if isinstance(value, Enum) else value


class TransitionLog:
    """`transitions.jsonl`: every observed status change, for the dashboard replay.

    Diagnostic, so not fsync'd: lines are buffered in memory and written by a background
    thread at least every `flush_interval_s`, and at `close`. A SIGKILL loses at most that
    much and may leave a torn last line, which `read_transitions` skips and the next
    `TransitionLog` on the file cuts off before appending.
    """

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
        self._fd = _open_append(path, read=True)
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
        row_index: int,
        run_index: int,
        status: str,
        t: float,
        *,
        grade: bool | None = None,
    ) -> None:
        """An observed status change of one rollout, at `t` seconds since the session start.

        `grade` (whether grading was asked for) goes on a rollout's first record, so that a
        replay can tell a grading phase that was not requested from one that was missed.
        """
        self._write(
            {
                "kind": "status",
                "rollout_id": rollout_id,
                "row_index": row_index,
                "run_index": run_index,
                "status": _plain(status),
                "t": t,
                "grade": grade,
            }
        )

    def admission_retry(
        self,
        rollout_id: str,
        row_index: int,
        run_index: int,
        *,
        t: float,
        attempt: int,
        delay_s: float,
        status_code: int = 429,
        server: str | None = None,
    ) -> None:
        """Admission attempt `attempt` (1-based) was refused; the next one in `delay_s`."""
        self._write(
            {
                "kind": "admission_retry",
                "rollout_id": rollout_id,
                "row_index": row_index,
                "run_index": run_index,
                "t": t,
                "attempt": attempt,
                "status_code": status_code,
                "delay_s": round(delay_s, 3),
                "server": server,
            }
        )

    def cancel_request(
        self,
        rollout_id: str,
        row_index: int,
        run_index: int,
        *,
        t: float,
        disposition: str | None = None,
        error: str | None = None,
    ) -> None:
        """A cancel was asked for; `disposition` is the server's answer, `error` a failure."""
        self._write(
            {
                "kind": "cancel_request",
                "rollout_id": rollout_id,
                "row_index": row_index,
                "run_index": run_index,
                "t": t,
                "disposition": _plain(disposition),
                "error": error,
            }
        )

    def _write(self, record: dict[str, Any]) -> None:
        record["t"] = round(float(record["t"]), 3)
        line = _json_line({key: value for key, value in record.items() if value is not None})
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
                _write_all(self._fd, data)
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

    def __enter__(self) -> TransitionLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


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
    """The records of `transitions.jsonl` in file order, each with `kind` and `t`.

    A torn last line (no newline) is dropped quietly, as it is the expected result of a
    crash; other lines that are not records are skipped with a warning.
    """
    warn = on_warning or _log_warning
    with path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            if not raw.endswith(b"\n"):
                return
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
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
            yield record


# -- index.jsonl ------------------------------------------------------------------------------


def index_rows(
    items: Iterable[WorkItem],
    results: Mapping[ItemKey, ItemResult],
    *,
    resumed: Collection[ItemKey] = (),
) -> list[dict[str, Any]]:
    """One index row per work item, in `(row_index, run_index)` order.

    `resumed` holds the keys whose result was carried over from an earlier session.
    """
    rows: list[dict[str, Any]] = []
    for item in sorted(items, key=lambda item: item.key):
        result = results.get(item.key)
        row: dict[str, Any] = {
            "row_index": item.row_index,
            "run_index": item.run_index,
            "rollout_id": None,
            "status": "pending",
            "reward": None,
            "tokens": None,
            "duration_ms": None,
            "error_type": None,
        }
        if result is not None:
            row.update(
                rollout_id=result.rollout_id,
                status=result.status,
                reward=result.reward,
                tokens=result.tokens,
                duration_ms=result.duration_ms,
                error_type=result.error_type,
            )
        row = {key: value for key, value in row.items() if value is not None}
        row["resumed"] = result is not None and item.key in resumed
        rows.append(row)
    return rows


def write_index(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Rewrite `index.jsonl` atomically with `rows` (see `index_rows`), one per line."""
    write_bytes_atomic(path, b"".join(_json_line(row) for row in rows))


# -- logs.txt ---------------------------------------------------------------------------------


class RunLog:
    """`logs.txt`: timestamped lines, every one redacted before it reaches the file.

    `handler()` gives a `logging.Handler` writing through this log, so library loggers and
    a launched server's output end up in the same place. Writes after `close` are dropped:
    a handler may outlive the run it was attached to.
    """

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self._fd: int | None = _open_append(path)
        self._lock = threading.Lock()
        #: The first write failure (a full or read-only disk): later lines are dropped.
        self.error: OSError | None = None

    def write(self, message: str, *, source: str | None = None) -> None:
        """Append `message`, one timestamped line per line of it."""
        text = self.redactor.redact(message.rstrip("\r\n"))
        prefix = f"{iso_utc()} " + (f"[{source}] " if source else "")
        lines = (line.rstrip("\r") for line in text.split("\n"))
        data = "".join(f"{prefix}{line}\n" for line in lines).encode("utf-8", "replace")
        with self._lock:
            if self._fd is not None and self.error is None:
                try:
                    _write_all(self._fd, data)
                except OSError as exc:
                    # A log that cannot be written must not end the run it describes.
                    self.error = exc

    def handler(self, level: int = logging.NOTSET) -> logging.Handler:
        return _RunLogHandler(self, level)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> RunLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _RunLogHandler(logging.Handler):
    def __init__(self, log: RunLog, level: int) -> None:
        super().__init__(level)
        self._log = log
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._log.write(self.format(record))
        except Exception:
            self.handleError(record)


__all__ = [
    "EVENTS_FILE",
    "INDEX_FILE",
    "LOGS_FILE",
    "MANIFEST_FILE",
    "METRICS_FILE",
    "RESUME_HINT",
    "SCHEMA_VERSION",
    "TRANSITIONS_FILE",
    "TRIALS_DIR",
    "Journal",
    "ResumeRefused",
    "RunFolder",
    "RunFolderError",
    "RunLog",
    "TransitionLog",
    "WarningSink",
    "default_run_name",
    "describe_os_error",
    "index_rows",
    "manifest_inputs",
    "read_transitions",
    "validate_run_name",
    "write_bytes_atomic",
    "write_index",
    "write_json_atomic",
]
