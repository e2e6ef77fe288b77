"""The phase track: queued → running → grading → terminal, one glyph each (DESIGN.md §2).

Pure functions from a board record to Rich text, shared by the table and the details pane.

A phase is `observed` when a poll saw it, its server reported it (an ownership event,
PROTOCOL.md §8.1) or, for `running`, the rollout called the model through the run's gateway
(the board's rule: its first call proves it). They are told apart only where that matters: on
a rollout whose
server does report, a past phase only a poll saw is drawn half-filled — the server's own
report of it never came (yet), so its time is the poll's, not the server's.
"""

from __future__ import annotations

from rich.text import Text

from core.phases import PHASES, SkipReason
from core.rollout_record import RolloutRecord
from core.types import RolloutStatus

# Glyph and style per state of a phase cell. Styles are theme-neutral ANSI names so that the
# track reads the same in every theme and in NO_COLOR terminals (the glyph carries the meaning).
OBSERVED = ("●", "green")
POLL_ONLY = ("◐", "green")
CURRENT = ("◉", "bold cyan")
AHEAD = ("·", "dim")
SKIP_GLYPHS: dict[SkipReason, tuple[str, str]] = {
    "not_observed": ("◌", "yellow"),
    "not_requested": ("○", "dim"),
    "ended_early": ("×", "red"),
    # Not observed either, but nobody was watching: no warning.
    "not_recorded": ("◌", "dim"),
}
TERMINAL_GLYPHS = {
    RolloutStatus.SUCCESS: ("✔", "bold green"),
    RolloutStatus.FAILURE: ("✘", "bold red"),
    RolloutStatus.CANCELLED: ("⊘", "bold yellow"),
}
NOT_ADMITTED = ("!", "bold red")
CONNECTOR = ("─", "dim")

SKIP_EXPLANATIONS: dict[SkipReason, str] = {
    "not_observed": "happened unseen: no poll caught it and the server did not report it",
    "not_requested": "grading was not requested (grade=false)",
    "ended_early": "the rollout ended before reaching it",
    "not_recorded": "not recorded",  # by any file of the run folder
}

LEGEND = (
    ("●", "observed"),
    ("◐", "seen by a poll only; no server report"),
    ("◉", "current"),
    ("·", "not yet"),
    ("◌", "not observed"),
    ("○", "not requested"),
    ("×", "ended early"),
    ("✔", "success"),
    ("✘", "failure"),
    ("⊘", "cancelled"),
    ("!", "not admitted"),
)


def phase_cells(record: RolloutRecord) -> list[tuple[str, str]]:
    """(glyph, style) for queued, running, grading and the terminal cell."""
    if record.admission_error is not None:
        return [NOT_ADMITTED, AHEAD, AHEAD, NOT_ADMITTED]
    marks = record.marks
    reporting = any(mark.source == "server" for mark in marks.values())
    skipped = record.skipped_phases()
    cells: list[tuple[str, str]] = []
    for phase in PHASES:
        mark = marks.get(phase)
        if phase == record.status and not record.untracked:
            cells.append(CURRENT)
        elif phase in skipped:  # before the mark: a phase not recorded has a made-up one
            cells.append(SKIP_GLYPHS[skipped[phase]])
        elif mark is not None:
            cells.append(POLL_ONLY if reporting and mark.source == "poll" else OBSERVED)
        else:
            cells.append(AHEAD)
    cells.append(TERMINAL_GLYPHS.get(record.status, AHEAD))
    return cells


def phase_track(record: RolloutRecord) -> Text:
    track = Text(no_wrap=True, overflow="crop")
    for index, (glyph, style) in enumerate(phase_cells(record)):
        if index:
            track.append(CONNECTOR[0], CONNECTOR[1])
        track.append(glyph, style)
    return track
