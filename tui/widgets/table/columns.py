"""The rollout table's columns: which of them fit a width, and what each cell of a row says.

Text and style names only; table_strips.py draws them as strips, which the table
(rollout_table.py) caches.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.board import RolloutBoard
from core.eval.compare.baseline import Baseline
from core.eval.compare.outcomes import ItemOutcome
from core.eval.count_text import compact_count
from core.eval.duration_text import duration
from core.rollout_record import RolloutRecord
from tui.widgets.format import STATUS_STYLES, one_line, reward

PHASE_TRACK_WIDTH = 7  # four glyphs and three connectors


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    #: The width it gets (the error and flags columns: the least it gets).
    width: int
    align: str = "left"
    #: Narrow tables drop these columns, 1 first (0: never dropped). Those past
    #: `SHRINK_LEVEL` go only once the kept columns have shrunk and still do not fit.
    drop: int = 0
    #: Drawn in the table's muted colour: context, not news.
    dim: bool = False
    #: What it shrinks to at `SHRINK_LEVEL` (None: it does not shrink).
    least: int | None = None


# Once every column that can go has gone and the rest still do not fit (a details pane
# beside a narrow terminal), the kept columns give up their slack, then the rollout id and
# the status go too: the phase track is never cut.
SHRINK_LEVEL = 9
#: The baseline's outcome column: shown only with `--baseline`.
BASE = "base"
COLUMNS = (
    Column("mark", "", 2),
    Column("row", "row", 6, "right", least=5),
    Column("try", "try", 4, "right", drop=1, dim=True),
    Column("rollout", "rollout", 11, drop=10, dim=True, least=9),
    Column("status", "status", 13, drop=11),
    Column("phases", "phases", 8),
    Column("in_phase", "in phase", 9, "right", drop=4),
    Column("total", "total", 8, "right", drop=2, dim=True),
    Column("reward", "reward", 7, "right", drop=6),
    # With a baseline, what the user runs the eval to see: at 80 columns the time in phase
    # gives way to it (the model column and the stuck flag still say what is slow).
    Column(BASE, "base", 9, drop=5),
    Column("tokens", "tokens", 7, "right", drop=2),
    # "model 3m05s": the longest a call can wait before it says hours. The clearest sign of
    # why a rollout is stuck (a call that does not answer): it stays longer than the error.
    Column("model", "model", 12, drop=7),
    # The error's category is in the details, and the status is red already; a stuck or
    # untracked rollout says so only here: the flags stay longer.
    Column("error", "error", 12, drop=3),
    Column("flags", "flags", 10, drop=8),
)
#: A watch's rollouts have no dataset row nor attempt: their run and server take those
#: columns' places (and keys: `O` sorts by the run, grouping its rollouts), as wide as a run's
#: name needs.
WATCH_COLUMNS: dict[str, Column | None] = {
    "row": Column("row", "run", 16, least=10),
    "try": Column("try", "server", 12, drop=1, dim=True),
    # The id is what a watch's user looks a rollout up by (the filter takes a prefix of it).
    "rollout": Column("rollout", "rollout", 24, drop=10, dim=True, least=9),
    # Nothing tells a watch of results, rewards, tokens or model calls: no columns for them.
    "reward": None,
    "tokens": None,
    "model": None,
    "error": None,
}
# Spare width goes to the flags first ("stuck, cancelled_running, 2 retries" should not be
# cut), then to the error up to a cap (categories are short; messages are in the details).
FLAGS_COMFORTABLE = 28
ERROR_MAX = 20

Layout = tuple[tuple[Column, int], ...]


def layout_columns(width: int, *, baseline: bool = False, watch: bool = False) -> Layout:
    """The columns that fit in `width`, with their widths: never more than `width` (from 15
    columns on: the mark, the row and the phase track), so that no column is ever cut; the
    base column only with a `baseline`; a `watch`'s run and server for the row and attempt.

    Columns are dropped least useful first until the rest fit (see `SHRINK_LEVEL` for the
    last of them), then the spare width goes to flags and error.
    """
    shown = [
        column
        for column in (WATCH_COLUMNS.get(c.key, c) if watch else c for c in COLUMNS)
        if column is not None and (baseline or column.key != BASE)
    ]
    widths = {column.key: column.width for column in shown}
    for level in sorted({column.drop for column in COLUMNS if column.drop} | {SHRINK_LEVEL}):
        if sum(widths[column.key] for column in shown) <= width:
            break
        if level == SHRINK_LEVEL:
            widths.update((c.key, c.least) for c in shown if c.least is not None)
        else:
            shown = [column for column in shown if column.drop != level]
    widths = {column.key: widths[column.key] for column in shown}
    spare = max(width - sum(widths.values()), 0)
    for key, up_to in (("flags", FLAGS_COMFORTABLE), ("error", ERROR_MAX), ("flags", width)):
        if key in widths:
            given = max(min(spare, up_to - widths[key]), 0)
            widths[key] += given
            spare -= given
    return tuple((column, widths[column.key]) for column in shown)


def column_at(layout: Layout, x: int) -> str | None:
    """The key of the column drawn at `x` (None past the last)."""
    left = 0
    for column, width in layout:
        if left <= x < left + width:
            return column.key
        left += width
    return None


def cell(text: str, width: int, align: str = "left") -> str:
    """`text` fitted to a cell of `width` (an ellipsis when cut), one space before the next."""
    if len(text) > width - 1:
        text = text[: max(width - 2, 0)] + "…"
    return (text.rjust(width - 1) if align == "right" else text.ljust(width - 1)) + " "


def header_cells(
    layout: Layout, sorted_by: str | None = None, marker: str = ""
) -> list[tuple[str, bool]]:
    """Each column's title fitted to its cell, and whether it is the column `sorted_by`, whose
    title carries `marker` (where the title fills its cell, in the space before the next)."""
    cells = []
    for column, width in layout:
        title, sorted_here = column.title, column.key == sorted_by
        if not sorted_here:
            cells.append((cell(title, width, column.align), False))
        elif len(title) + len(marker) <= width - 1:
            cells.append((cell(title + marker, width, column.align), True))
        else:
            cells.append((cell(title, width, column.align)[:-1] + marker, True))
    return cells


def row_cells(
    record: RolloutRecord,
    board: RolloutBoard,
    now: float,
    *,
    marked: bool,
    baseline: Baseline | None = None,
) -> dict[str, tuple[str, str]]:
    """Each column's text and style name ("" for none) for one rollout; the phase track is
    drawn glyph by glyph, so it is not among them. Untrusted text is made safe here."""
    result = record.result_head
    status = record.display_status
    # A cancel the server never got (the flags say "cancel failed") leaves the status as is,
    # and an untracked rollout's cancel is never seen to end: its row keeps the status last seen.
    cancelling = record.cancelling and not record.untracked
    status_label = "cancelling…" if cancelling else status.replace("_", " ")
    in_phase = None if record.finished or record.untracked else now - record.phase_started_at
    end = record.terminal_at if record.terminal_at is not None else now
    sample_reward = result.reward if result is not None else None
    reported_by = record.reported_by
    return {
        "mark": ("▌" if marked else "", "bold yellow"),
        "row": (
            one_line(reported_by.run or "-")
            if reported_by is not None
            else "-"
            if record.source_row_index is None
            else str(record.source_row_index),
            "",
        ),
        "try": (
            one_line(reported_by.server_name or reported_by.server_id)
            if reported_by is not None
            else "-"
            if record.run_index is None
            else str(record.run_index),
            "",
        ),
        "rollout": (one_line(record.rollout_id[: 32 if reported_by else 10]), ""),
        "status": (status_label, STATUS_STYLES.get(status, "")),
        "in_phase": (duration(in_phase), ""),
        "total": (duration(end - record.submitted_at), ""),
        "reward": (reward(sample_reward), ""),
        BASE: base_cell(record, baseline),
        "tokens": (compact_count(record.model.tokens), ""),
        "model": model_activity(record, now),
        "error": (error_text(record), "red"),
        # A cancel's disposition is the server's word (or a folder's).
        "flags": (one_line(", ".join(flags(record, board, now))), "yellow"),
    }


#: The base cell's style when the rollout's item changed against the baseline.
BASE_STYLES = {"regressed": "bold red", "improved": "bold green", "error_changed": "yellow"}


def base_cell(record: RolloutRecord, baseline: Baseline | None) -> tuple[str, str]:
    """The baseline's outcome for the rollout's work item ("—" when it has none there: not
    in the baseline, or not finished), coloured when this rollout's own result regressed or
    improved on it."""
    if baseline is None:
        return "", ""
    outcome = baseline.record_outcome(record)
    if outcome is None:
        return "—", ""
    changed = baseline.row_class(record)
    return outcome_text(outcome), BASE_STYLES.get(changed or "", "")


def outcome_text(outcome: ItemOutcome) -> str:
    """A work item's outcome in a few characters: `✔ pass`, `✘ fail`, `skip`, or an error
    as `✘ ` and its type, abbreviated (`✘ agent` for agent_error)."""
    if outcome.kind == "pass":
        return "✔ pass"
    if outcome.kind == "failure":
        return "✘ fail"
    if outcome.kind == "skipped":
        return "skip"
    kind = one_line(outcome.error_type or "error")
    return "✘ " + (kind.removesuffix("_error") or kind)


def error_text(record: RolloutRecord) -> str:
    """The error column's text: why it was not admitted, else the result's error category,
    else its message (made safe); "" without an error."""
    result = record.result_head
    if record.admission_error is not None:
        return "not admitted"
    if result is not None and result.err_category is not None:
        return result.err_category.value
    if result is not None and result.err_message:
        return one_line(result.err_message)
    return ""


def model_activity(record: RolloutRecord, now: float) -> tuple[str, str]:
    """What the rollout does with the model, and its style: "model 12s" while a call waits
    for it, "idle 40s" since the last one ended, "-" before any; once the rollout is over
    (or no longer watched), how many calls it made."""
    activity = record.model
    if not record.in_flight:
        calls = activity.calls
        return ("-" if not calls else f"{calls} call" + ("s" if calls > 1 else ""), "")
    waiting = activity.waiting_since
    if waiting is not None:
        return f"model {duration(now - waiting)}", "cyan"
    if activity.last_ended_at is not None:
        return f"idle {duration(now - activity.last_ended_at)}", ""
    return "-", ""


def flags(record: RolloutRecord, board: RolloutBoard, now: float) -> list[str]:
    """What needs an eye: sent by hand, stuck, untracked, requeued, the last cancel, polling
    trouble."""
    named = []
    if record.manual:
        named.append("manual")
    if board.is_stuck(record, now):
        named.append("stuck")
    if record.untracked:
        named.append("untracked")
    if record.requeued_as is not None:
        named.append("requeued")
    for cancel in record.cancels[-1:]:
        named.append(cancel.disposition or ("cancel failed" if cancel.error else "cancelling"))
    if record.poll_error and not record.finished:
        named.append("poll trouble")
    elif record.poll_retries:
        named.append(f"{record.poll_retries} retries")
    return named
