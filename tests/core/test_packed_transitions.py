"""A finished rollout's transitions, packed: read back as the same `Transition`s, by index,
slice and iteration, and equal to the list they came from."""

from __future__ import annotations

import pytest

from core.handle import Transition
from core.packed_transitions import PackedTransitions
from core.rollout_record import RecordedRollout
from core.types import RolloutStatus

Q, R, G, S = (RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.GRADING,
              RolloutStatus.SUCCESS)  # fmt: skip
OBSERVED = [Transition(Q, 10.25), Transition(R, 11.5), Transition(G, 12.0), Transition(S, 13.0)]


def test_every_status_and_time_reads_back_as_it_was() -> None:
    every = [Transition(status, 1e9 + n / 3) for n, status in enumerate(RolloutStatus)]
    packed = PackedTransitions(every)
    assert list(packed) == every and packed == every
    assert all(type(transition) is Transition for transition in packed)
    assert len(packed) == len(every)


def test_indexes_and_slices_are_a_lists() -> None:
    packed = PackedTransitions(OBSERVED)
    assert packed[0] == OBSERVED[0] and packed[-1] == OBSERVED[-1] and packed[-4] == OBSERVED[0]
    assert packed[1:3] == OBSERVED[1:3] and packed[::-1] == OBSERVED[::-1]
    for wrong in (4, -5):
        with pytest.raises(IndexError):
            packed[wrong]
    assert packed != OBSERVED[:3] and packed != "QRGS"
    assert PackedTransitions([]) == [] and not PackedTransitions([])
    assert S in [transition.status for transition in packed]


def test_a_recording_seen_further_unpacks_its_transitions() -> None:
    recording = RecordedRollout(status=G, transitions=PackedTransitions(OBSERVED[:3]))
    recording.seen(OBSERVED[3])
    assert recording.transitions == OBSERVED and isinstance(recording.transitions, list)
    assert recording.status is S
