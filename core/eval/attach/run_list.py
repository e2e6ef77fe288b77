"""The runs under a results root, as `osmosis-tui runs` lists them and `attach` picks them.

A run is a folder of the root holding a `manifest.json`: ours, or the official
`osmosis eval run`'s (the same files, without our `transitions.jsonl`). What each says is read
from its results files, never from a live process:

- status: `running` while a process serves its control socket (`core.eval.attach.unix_socket`)
  or holds its name's lock (`core.eval.results.lock`: the official tool has no socket), else
  `finished` when its metrics.json says so, else `incomplete` (interrupted, stopped, or killed
  while it ran: a killed run's metrics.json still says `running`);
- done/total: the work items with a result in events.jsonl (the journal), of those the
  manifest's inputs make; pass rate by the rules of metrics.json, with the run's threshold;
- started: its latest invocation's start (metrics.json), else its creation (the manifest);
  duration: that invocation's, or, while it runs, how long it has been running.

A value no reader can use (a start that is no time on the clock, such as year 1 with an offset;
a duration that is no finite count of milliseconds from 0 up) is none, and the run's `problem`
says so: one odd folder is listed with its unreadable parts named, never a traceback for all.

Nothing here loads an HTTP stack: listing stays quick.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from core.eval.attach.unix_socket import is_served
from core.eval.results.events import Journal, ends_with_whole_record
from core.eval.results.folder import (
    EVENTS_FILE,
    LOCKS_DIR,
    MANIFEST_FILE,
    METRICS_FILE,
    TRANSITIONS_FILE,
)
from core.eval.results.lock import lock_holder
from core.eval.results.manifest import ManifestError, read_manifest, work_item_count
from core.eval.results.metrics import DEFAULT_PASS_THRESHOLD, progress, recorded_pass_threshold
from core.eval.untrusted_json import float_of, int_of, load_json_file, text_of, utc_time

ListedStatus = Literal["running", "incomplete", "finished"]
Tool = Literal["osmosis-tui", "osmosis"]


@dataclass(frozen=True)
class ListedRun:
    """One run folder, as its files describe it."""

    name: str
    folder: Path
    status: ListedStatus
    attachable: bool
    """A process serves its control socket: `osmosis-tui attach` can watch it."""
    tool: Tool
    """Who wrote it: osmosis-tui (it has a transitions.jsonl), or the official tool."""
    done: int
    total: int | None
    pass_rate: float | None
    """None until a sample completed (metrics.json then says 0)."""
    started_at: str | None
    duration_sec: float | None
    problem: str | None = None
    """Why some of it could not be read."""

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "folder": str(self.folder.absolute()),
            "status": self.status,
            "attachable": self.attachable,
            "tool": self.tool,
            "done": self.done,
            "total": self.total,
            "pass_rate": self.pass_rate,
            "started_at": self.started_at,
            "duration_sec": self.duration_sec,
            "problem": self.problem,
        }


def list_runs(output: Path, *, now: datetime | None = None) -> list[ListedRun]:
    """Every run folder under `output`, by name (none when `output` does not exist)."""
    try:
        folders = sorted(path for path in output.iterdir() if path.name != LOCKS_DIR)
    except (FileNotFoundError, NotADirectoryError):
        return []
    # A manifest that cannot be read (a FIFO, a symlink) still makes a run folder: listed, with
    # what could not be read said.
    return [
        describe_run(folder, now=now)
        for folder in folders
        if folder.is_dir() and os.path.lexists(folder / MANIFEST_FILE)
    ]


def find_run_folder(run: str, output: Path) -> Path | None:
    """The run folder `run` names: a folder holding a manifest, else a run of that name under
    the results root `output`; None when it names neither."""
    given = Path(run)
    for folder in (given, output / run) if given.is_dir() else (output / run,):
        if (folder / MANIFEST_FILE).is_file():
            return folder
    return None


def describe_run(folder: Path, *, now: datetime | None = None) -> ListedRun:
    """What the files of one run folder (and its name's lock) say of it."""
    problems: list[str] = []
    manifest: dict[str, Any] = {}
    try:
        manifest = read_manifest(folder / MANIFEST_FILE)
    except ManifestError as exc:
        problems.append(str(exc))
    metrics = _metrics(folder / METRICS_FILE, problems)
    found = metrics.get("eval_run")
    eval_run: dict[str, Any] = found if isinstance(found, dict) else {}
    inputs = manifest.get("inputs")
    total = work_item_count(inputs) if isinstance(inputs, dict) else None
    attachable = is_served(folder)
    recorded = eval_run.get("status")
    status: ListedStatus
    if attachable or lock_holder(folder.parent, folder.name) is not None:
        status = "running"
    elif recorded == "finished":
        status = "finished"
    else:
        status = "incomplete"
    counted = _summarized(folder, metrics) if status == "finished" else None
    if counted is None:
        counted = _journal_counts(folder, metrics, problems)
    done, pass_rate = counted
    started = _started(eval_run, manifest, folder, problems)
    return ListedRun(
        name=folder.name,
        folder=folder,
        status=status,
        attachable=attachable,
        tool="osmosis-tui" if (folder / TRANSITIONS_FILE).exists() else "osmosis",
        done=done,
        total=total,
        pass_rate=pass_rate,
        started_at=started,
        duration_sec=_duration(
            status, recorded, eval_run, started=started, now=now, folder=folder, problems=problems
        ),
        problem="; ".join(problems) or None,
    )


def _summarized(folder: Path, metrics: dict[str, Any]) -> tuple[int, float | None] | None:
    """Work items done and the pass rate as a finished run's metrics.json says them, when it
    is known to count the journal as the journal is; else None.

    Its summary counts what `_journal_counts` would (both by the rules of metrics.json, with
    its threshold), so a root of hundreds of runs of a million items each lists in the time
    of reading their metrics, not their journals. It is trusted only when the journal has not
    been written since (metrics.json is strictly newer: a write within the clock's tick is
    read the long way), is a regular file and ends with a whole record; otherwise the journal
    is read, and what is wrong with it said.
    """
    summary = metrics.get("summary")
    if not isinstance(summary, dict):
        return None
    done, completed, passed = (
        int_of(summary.get(name)) for name in ("total_samples", "completed_samples", "passed")
    )
    if done is None or completed is None or passed is None or not 0 <= passed <= completed <= done:
        return None
    try:
        journal, written = (folder / EVENTS_FILE).lstat(), (folder / METRICS_FILE).lstat()
    except OSError:
        return None
    if (
        not stat.S_ISREG(journal.st_mode)
        or not stat.S_ISREG(written.st_mode)
        or journal.st_mtime_ns >= written.st_mtime_ns
        or not ends_with_whole_record(folder / EVENTS_FILE)
    ):
        return None
    return done, passed / completed if completed else None


def _journal_counts(
    folder: Path, metrics: dict[str, Any], problems: list[str]
) -> tuple[int, float | None]:
    """Work items done and the pass rate, counted from the journal by metrics.json's rules
    (with the run's threshold); what cannot be read of it goes to `problems`."""
    try:
        results = Journal.load(folder / EVENTS_FILE, on_warning=problems.append)
    except OSError as exc:
        problems.append(f"{folder / EVENTS_FILE} cannot be read ({exc.strerror or exc})")
        results = {}
    threshold = recorded_pass_threshold(metrics)
    counted = progress(
        results.values(),
        total_items=0,
        pass_threshold=DEFAULT_PASS_THRESHOLD if threshold is None else threshold,
    )
    return counted.done, counted.pass_rate


def _metrics(path: Path, problems: list[str]) -> dict[str, Any]:
    try:
        document = load_json_file(path)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        problems.append(f"{path} cannot be read ({exc.strerror or exc})")
        return {}
    except ValueError as exc:
        problems.append(f"{path} cannot be read ({exc})")
        return {}
    return document if isinstance(document, dict) else {}


def _text(value: object) -> str | None:
    """Text, where an empty string is none."""
    return text_of(value) or None


def _started(
    eval_run: dict[str, Any], manifest: dict[str, Any], folder: Path, problems: list[str]
) -> str | None:
    """The run's start as its files say it, when it is a time on the clock (None, with a
    problem, when it is not)."""
    for file, field, value in (
        (METRICS_FILE, "eval_run.started_at", eval_run.get("started_at")),
        (MANIFEST_FILE, "created_at", manifest.get("created_at")),
    ):
        text = _text(value)
        if text is None:
            continue
        if utc_time(text) is None:
            problems.append(f"{folder / file}: {field} is no time that can be read")
            return None
        return text
    return None


def _duration(
    status: ListedStatus,
    recorded: object,
    eval_run: dict[str, Any],
    *,
    started: str | None,
    now: datetime | None,
    folder: Path,
    problems: list[str],
) -> float | None:
    if status == "running":
        began = utc_time(started)
        if began is None:
            return None
        return max(((now or datetime.now(timezone.utc)) - began).total_seconds(), 0.0)
    milliseconds = eval_run.get("duration_ms")
    # A run killed while it ran never wrote its duration (metrics.json still says running).
    if recorded == "running" or milliseconds is None:
        return None
    # Infinity, NaN, 10**400 (past a float's range), a negative count, true, text: no duration.
    finite = float_of(milliseconds)
    if finite is None or finite < 0:
        problems.append(
            f"{folder / METRICS_FILE}: eval_run.duration_ms is no duration "
            "(a finite number of milliseconds, 0 or more)"
        )
        return None
    return finite / 1000


def local_time(text: str | None) -> str:
    """A run's start (`started_at`) in local time, to the minute, as the run's default name
    has it: how `runs` and the dashboard's runs screen show it."""
    if text is None:
        return "-"
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        # A moment the clock can place in UTC may still lie past year 9999 in local time.
        return moment.astimezone().strftime("%Y-%m-%d %H:%M")
    except (ValueError, OverflowError):
        return "?"


def live_runs(output: Path) -> list[ListedRun]:
    """The runs under `output` a dashboard can attach to now."""
    return [run for run in list_runs(output) if run.attachable]


__all__ = [
    "ListedRun",
    "ListedStatus",
    "describe_run",
    "find_run_folder",
    "list_runs",
    "live_runs",
    "local_time",
]
