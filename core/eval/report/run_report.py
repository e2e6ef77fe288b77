"""`RunReport`: what a report of a finished run is drawn from, as plain data."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.eval.results.metrics import Progress
from core.eval.timeline.model import RunTimeline
from core.rollout_record import RolloutRecord
from core.transcript import Transcript


@dataclass(frozen=True)
class RunReport:
    """A finished run: its time line, its board's records, its progress, and how to read a
    failed rollout's conversation (read only for the failures the page shows)."""

    #: The run's name (its folder's).
    name: str
    timeline: RunTimeline
    records: Sequence[RolloutRecord]
    #: The board's clock at the time line's 0: a record's times are on the board's clock.
    zero: float
    progress: Progress
    pass_threshold: float
    transcript_of: Callable[[RolloutRecord], Transcript | None]
    #: What could not be read of the run folder (lines of its recording, files).
    warnings: Sequence[str] = ()
