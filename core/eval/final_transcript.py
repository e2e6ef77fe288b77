"""A finished rollout's whole conversation: its final sample's messages, else the trajectory its
server left in the run folder, for the dashboard's transcript panel and the report alike.

The sample comes first: it is the whole conversation, where a preview keeps only the latest
steps. The official server's result carries no messages, so its `rollout_trials/<rollout_id>/
trajectory.json` stands in for it (its last live preview may lack the final answer).
"""

from __future__ import annotations

from pathlib import Path

from core.eval.results.trials import TRAJECTORY_FILE
from core.rollout_record import RolloutRecord
from core.transcript import Transcript, preview_path, read_trajectory, transcript_of_sample


def sample_transcript(record: RolloutRecord) -> Transcript | None:
    """The finished `record`'s sample as a transcript, when it holds messages."""
    result = record.latest_result
    if not record.finished or result is None:
        return None
    sample = result.sample
    if sample is None or not sample.messages:
        return None
    return transcript_of_sample(sample, status=result.status.value)


def trajectory_transcript(record: RolloutRecord, trials_root: Path | None) -> Transcript | None:
    """The finished `record`'s conversation as its server left it under `trials_root` (a run
    folder's `rollout_trials/`); None when there is none (yet)."""
    if not record.finished or trials_root is None:
        return None
    path = preview_path(trials_root, record.rollout_id, TRAJECTORY_FILE)
    return None if path is None else read_trajectory(path, root=trials_root)


def final_transcript(record: RolloutRecord, trials_root: Path | None) -> Transcript | None:
    """The finished `record`'s whole conversation: its sample's, else its trajectory's."""
    return sample_transcript(record) or trajectory_transcript(record, trials_root)
