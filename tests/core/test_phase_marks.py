"""A rollout's phase marks, packed once it finished: every field of every mark reads back as
it was, a mark written later (a server's report after the poll that ended it) is kept and the
set stays packed, and the times alone read without making marks."""

from __future__ import annotations

import sys

from core.phase_marks import PhaseMarks
from core.phases import PhaseMark
from core.types import RolloutStatus

Q, R, G, S = (RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.GRADING,
              RolloutStatus.SUCCESS)  # fmt: skip
SERVER = sys.intern("fleet-11")


def finished_marks() -> dict[RolloutStatus, PhaseMark]:
    """One mark of each source and shape: a poll's, a model call's with the poll's time, a
    server's with every field, and a poll's of the end."""
    return {
        Q: PhaseMark(Q, 10.25, "poll"),
        R: PhaseMark(R, 10.5, "model", polled_at=11.0),
        G: PhaseMark(
            G,
            12.0,
            "server",
            server_time=1.7e9 + 0.125,
            event_sequence=7,
            server_id=SERVER,
            polled_at=12.5,
        ),
        S: PhaseMark(S, 13.0, "poll"),
    }


def test_packed_marks_read_back_as_they_were_in_their_order() -> None:
    given = finished_marks()
    marks = PhaseMarks(given)
    marks.pack()
    assert marks.packed
    assert marks == given and dict(marks.items()) == given
    assert list(marks) == [Q, R, G, S] and len(marks) == 4
    assert marks[G] == given[G] and marks[G].server_id is SERVER
    assert marks.get(RolloutStatus.FAILURE) is None and RolloutStatus.FAILURE not in marks
    assert S in marks and list(marks.values()) == list(given.values())
    assert marks.at(R) == 10.5 and marks.at(RolloutStatus.CANCELLED) is None
    assert marks.times() == [(Q, 10.25), (R, 10.5), (G, 12.0), (S, 13.0)]


def test_a_mark_written_after_packing_is_kept_packed_with_the_rest() -> None:
    given = finished_marks()
    del given[G]
    marks = PhaseMarks(given)
    marks.pack()
    late = PhaseMark(G, 11.9, "server", server_time=1.7e9, event_sequence=8, server_id=SERVER)
    marks[G] = late
    assert marks.packed and marks[G] == late and len(marks) == 4
    del marks[R]
    assert marks.packed and R not in marks and marks.at(G) == 11.9


def test_unpacked_marks_are_the_dict_they_hold() -> None:
    marks = PhaseMarks()
    assert not marks and marks.times() == [] and marks.at(Q) is None
    marks[Q] = PhaseMark(Q, 1.0, "poll")
    assert not marks.packed and marks.at(Q) == 1.0 and marks == {Q: PhaseMark(Q, 1.0, "poll")}
    empty = PhaseMarks()
    empty.pack()
    assert empty == {} and empty.times() == []


def test_a_sequence_number_beyond_64_bits_stays_unpacked() -> None:
    odd = PhaseMark(S, 2.0, "server", event_sequence=2**64, server_id=SERVER)
    marks = PhaseMarks({S: odd})
    marks.pack()
    assert not marks.packed and marks[S] == odd
