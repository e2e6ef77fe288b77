"""The failures: each failed or never admitted rollout with its error, and its conversation
(`RunReport.transcript_of`: its final sample's, else its trajectory's, else its last preview)
folded under it, and the errors of its model calls.

Bounded: the first `MAX_FAILURES` failures by source row are listed, the first `MAX_TRANSCRIPTS`
of them with their conversation, each text cut at `MAX_TEXT_CHARS` as the dashboard cuts it.
Every text goes through the record's redaction (`RolloutRecord.masked`) before it is escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from core.eval.report.markup import text
from core.rollout_record import NOT_ADMITTED, RolloutRecord
from core.transcript import Transcript, TranscriptStep
from core.types import RolloutStatus

MAX_FAILURES = 200
MAX_TRANSCRIPTS = 50
MAX_TEXT_CHARS = 4_000
NO_CONVERSATION = (
    "No conversation: the result holds no messages, and the run folder no trajectory or preview."
)
FAILED = frozenset({RolloutStatus.FAILURE.value, NOT_ADMITTED})


def is_failure(record: RolloutRecord) -> bool:
    """A rollout that failed on its server, or that its server never admitted."""
    return record.display_status in FAILED


def in_row_order(records: Iterable[RolloutRecord]) -> list[RolloutRecord]:
    """By source row (the work item's row when the record has none) and attempt; rollouts
    sent by hand, which have no row, last."""

    def key(record: RolloutRecord) -> tuple[bool, int, int]:
        row = record.source_row_index if record.source_row_index is not None else record.row_index
        return (row is None, row or 0, record.run_index or 0)

    return sorted(records, key=key)


def failures(
    records: Sequence[RolloutRecord],
    transcript_of: Callable[[RolloutRecord], Transcript | None],
) -> str:
    """The section's body: a note when nothing failed, else a list of the failures."""
    failed = [record for record in in_row_order(records) if is_failure(record)]
    if not failed:
        return '<p class="note">No rollout failed.</p>'
    shown = failed[:MAX_FAILURES]
    items = "".join(
        _failure(record, transcript_of(record) if index < MAX_TRANSCRIPTS else None, index)
        for index, record in enumerate(shown)
    )
    notes = [f"{len(failed):,} rollouts failed"]
    if len(failed) > len(shown):
        notes.append(f"the first {len(shown):,} are listed")
    if len(shown) > MAX_TRANSCRIPTS:
        notes.append(f"the first {MAX_TRANSCRIPTS} with their conversation")
    return f'<p class="note">{text("; ".join(notes))}.</p><ol id="failures">{items}</ol>'


def _failure(record: RolloutRecord, transcript: Transcript | None, index: int) -> str:
    result = record.result_head
    category = result.err_category.value if result and result.err_category else None
    message = (result.err_message if result else None) or record.admission_error
    row = "-" if record.source_row_index is None else str(record.source_row_index)
    attempt = "-" if record.run_index is None else str(record.run_index)
    head = (
        f'<span class="status {text(record.display_status)}">{text(record.display_status)}</span> '
        f"source row {text(row)}, attempt {text(attempt)}"
        f' · <span class="id">{text(record.rollout_id)}</span>'
        + (f" · {text(category)}" if category else "")
    )
    calls = "".join(
        f'<pre class="message">model call {call.call_id}'
        f"{'' if call.status is None else f' (HTTP {call.status})'}: "
        f"{_said(record, call.error)}</pre>"
        for call in record.model.recent
        if call.error
    )
    if index >= MAX_TRANSCRIPTS:
        body = ""
    elif transcript is None:
        body = f'<p class="note">{NO_CONVERSATION}</p>'
    else:
        body = _transcript(record, transcript)
    return (
        f'<li class="failure" data-rollout="{text(record.rollout_id)}"><p class="head">{head}</p>'
        + (f'<pre class="message">{_said(record, message)}</pre>' if message else "")
        + (calls or ("" if message else '<p class="note">No error message.</p>'))
        + (f"<details><summary>conversation</summary>{body}</details>" if body else "")
        + "</li>"
    )


def _said(record: RolloutRecord, words: str) -> str:
    """Untrusted text: redacted first (a secret is never cut in two), then cut, then escaped."""
    masked = record.masked(words)
    more = len(masked) - MAX_TEXT_CHARS
    if more <= 0:
        return text(masked)
    return text(masked[:MAX_TEXT_CHARS]) + f'<span class="note">… ({more:,} more characters)</span>'


def _transcript(record: RolloutRecord, transcript: Transcript) -> str:
    where = {
        "sample": "its result",
        "trajectory": "the trajectory its server left",
        "preview": "its last preview",
    }
    note = f"from {where.get(transcript.origin, transcript.origin)}"
    if transcript.truncated:
        note += "; older steps or long texts were left out"
    steps = "".join(
        _step(record, step, position) for position, step in enumerate(transcript.steps, 1)
    )
    return f'<p class="note">{text(note)}</p><ol class="steps">{steps}</ol>'


def _step(record: RolloutRecord, step: TranscriptStep, position: int) -> str:
    number = step.step_id if step.step_id is not None else position
    parts = [f'<p class="role">{text(step.role)} <span class="note">#{number}</span></p>']
    if step.reasoning:
        parts.append(f'<pre class="reasoning">{_said(record, step.reasoning)}</pre>')
    if step.text:
        parts.append(f"<pre>{_said(record, step.text)}</pre>")
    parts.extend(
        f'<pre class="tool">→ {_said(record, f"{call.name}({call.arguments})")}</pre>'
        for call in step.tool_calls
    )
    parts.extend(
        f'<pre class="tool">← {_said(record, result.text or "(empty)")}</pre>'
        for result in step.tool_results
    )
    return f'<li class="step">{"".join(parts)}</li>'
