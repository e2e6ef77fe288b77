"""The table of rollouts: a row each, as the dashboard's export writes it
(`core.eval.results.export.export_row`), with its total time.

Bounded: at most `MAX_ROWS` rows, the failures first (a shared report is read for them), then
the rest by source row and attempt; the caption says how many are left out and where they all
are (the run folder's files). A page of 100,000 table rows would not open on most machines.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.eval.duration_text import duration
from core.eval.report.failures import in_row_order, is_failure
from core.eval.report.markup import text
from core.eval.results.export import export_row
from core.eval.timeline.model import RunTimeline
from core.rollout_record import RolloutRecord

MAX_ROWS = 2_000
#: The longest error text a cell shows, and its tooltip; the failures section has more.
MAX_ERROR_CHARS = 160
MAX_TOOLTIP_CHARS = 1_000
#: The columns: heading, and whether it holds numbers (aligned right).
HEADINGS = (
    ("row", False),
    ("attempt", False),
    ("rollout", False),
    ("server", False),
    ("status", False),
    ("reward", True),
    ("time", True),
    ("tokens", True),
    ("calls", True),
    ("error", False),
)


def table_order(records: Sequence[RolloutRecord]) -> list[RolloutRecord]:
    """Failures first, then the rest, each by source row and attempt (`in_row_order`)."""
    ordered = in_row_order(records)
    return [r for r in ordered if is_failure(r)] + [r for r in ordered if not is_failure(r)]


def rows_table(records: Sequence[RolloutRecord], zero: float, timeline: RunTimeline) -> str:
    """The table, with a caption saying what it holds; a rollout's server is the one its
    record names, else the lane `timeline` put it in (a replay knows it from the server's
    own events)."""
    ordered = table_order(records)
    shown = ordered[:MAX_ROWS]
    left_out = len(ordered) - len(shown)
    caption = f"{len(records):,} rollouts, failures first, then by source row and attempt"
    if left_out:
        caption += (
            f"; the first {len(shown):,} are shown and {left_out:,} left out "
            "(the run folder's events.jsonl holds every result)"
        )
    head = "".join(
        f'<th class="number">{name}</th>' if numbers else f"<th>{name}</th>"
        for name, numbers in HEADINGS
    )
    body = "".join(_row(record, zero, timeline) for record in shown)
    return (
        f'<table id="rows" data-rows="{len(shown)}" data-left-out="{left_out}">'
        f"<caption>{text(caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def _row(record: RolloutRecord, zero: float, timeline: RunTimeline) -> str:
    row = export_row(record, zero)
    total = None if record.terminal_at is None else record.terminal_at - record.submitted_at
    error = record.masked(_error(row))
    reward = row["reward"]
    status = str(row["status"])
    cells = [
        _cell(row["source_row_index"]),
        _cell(row["run_index"]),
        f'<td class="id" title="{text(record.rollout_id)}">{text(record.rollout_id[:12])}</td>',
        _cell(row["server"] or _lane(timeline, record.rollout_id)),
        f'<td class="status {text(status)}">{text(status)}</td>',
        _cell(None if reward is None else f"{reward:g}", "number"),
        _cell(None if total is None else duration(total), "number"),
        _cell(row["tokens"], "number"),
        _cell(row["model_calls"], "number"),
        f'<td class="error" title="{text(error[:MAX_TOOLTIP_CHARS])}">{text(_cut(error))}</td>'
        if error
        else "<td></td>",
    ]
    return f'<tr data-rollout="{text(record.rollout_id)}">{"".join(cells)}</tr>'


def _lane(timeline: RunTimeline, rollout_id: str) -> str | None:
    span = timeline.spans.get(rollout_id)
    return span.lane if span is not None and span.lane else None


def _error(row: dict[str, object]) -> str:
    category, message = row["err_category"], row["err_message"]
    return ": ".join(str(part) for part in (category, message) if part)


def _cut(error: str) -> str:
    first = error.split("\n", 1)[0]
    return first if len(first) <= MAX_ERROR_CHARS else first[: MAX_ERROR_CHARS - 1] + "…"


def _cell(value: object, css: str = "") -> str:
    shown = "" if value is None else text(value)
    return f'<td class="{css}">{shown}</td>' if css else f"<td>{shown}</td>"
