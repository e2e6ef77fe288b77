"""The time line of a recording: in flight, lanes, rail and markers exactly as
transitions.jsonl says, checked by hand at chosen instants and against the replay's own
board seeked to each of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.eval.results.recording import read_recording
from core.eval.timeline.model import MarkerKind, RunTimeline
from core.eval.timeline.recorded import timeline_of_recording
from tests.tui.recordings import (
    B2,
    D2,
    OLD,
    SLOW,
    A,
    B,
    C,
    D,
    M,
    write_jsonl,
    write_recording,
    write_steered_run,
)
from tests.tui.test_replay_official import CUT, FAILED, OK0, OK1, OK2, SKIPPED, official_run
from tui.sources.replay import ReplaySource


def steered(tmp_path: Path) -> tuple[ReplaySource, RunTimeline]:
    source = ReplaySource(write_steered_run(tmp_path / "run"))
    return source, source.timeline


#: (seconds into the recording, the rollouts in flight then), read off write_steered_run's
#: lines: the second invocation starts at 1.6, where the first one's last line is.
STEERED_IN_FLIGHT = [
    (0.0, [A]),
    (0.15, [A, B]),
    (0.2, [A, B, C, D]),
    (0.7, [A, B, C, D, M]),
    (0.99, [A, B, C, D, M]),
    (1.0, [A, C, D, M]),  # b's cancelled line
    (1.1, [A, D, M]),  # c untracked
    (1.2, [D, M]),  # a's success (the server's grading report ended nothing)
    (1.45, [D]),
    (1.5, []),
    (1.8, [D2, B2]),
    (2.1, [B2]),
    (2.2, []),
]


@pytest.mark.parametrize(("t", "expected"), STEERED_IN_FLIGHT)
def test_in_flight_is_what_the_log_says(tmp_path: Path, t: float, expected: list[str]) -> None:
    _source, timeline = steered(tmp_path)
    assert timeline.in_flight_at(t) == expected
    assert timeline.count_at(t) == len(expected)


def test_in_flight_is_the_replayed_boards_at_every_instant(tmp_path: Path) -> None:
    """At each event's time and between them, the rollouts the time line says were in flight
    are those the replay's board has in flight once seeked there."""
    source, timeline = steered(tmp_path)
    instants = sorted({round(e.t, 3) for e in source.events} | {0.05, 0.95, 1.55, 1.75, 2.5})
    for t in instants:
        source.seek(t)
        on_board = sorted(r.rollout_id for r in source.board if r.in_flight)
        assert sorted(timeline.in_flight_at(t)) == on_board, t


def test_a_lane_per_server_that_reported(tmp_path: Path) -> None:
    _source, timeline = steered(tmp_path)
    assert timeline.lanes() == ["host-a", ""]
    assert timeline.in_flight_at(0.5, lane="host-a") == [A]
    assert timeline.count_at(0.5, lane="") == 3
    assert timeline.peaks(0.0, 2.0, 4, lane="host-a") == [1, 1, 1, 0]


def test_markers_are_where_the_log_says(tmp_path: Path) -> None:
    """The pause at 1.6, the resume and the new limit 0.1 s into the second invocation (at
    1.7 on the time line), the cancels, the untrack, the requeue and the rollout sent by hand."""
    _source, timeline = steered(tmp_path)
    seen = [(round(m.t, 3), m.kind, m.rollout_id) for m in timeline.markers]
    assert seen == [
        (0.7, MarkerKind.MANUAL, M),
        (0.8, MarkerKind.CANCEL, B),
        (1.1, MarkerKind.UNTRACK, C),
        (1.4, MarkerKind.REQUEUE, D),
        (1.4, MarkerKind.CANCEL, D),
        (1.6, MarkerKind.PAUSE, None),
        (1.6, MarkerKind.SESSION, None),  # the first invocation ended
        (1.6, MarkerKind.SESSION, None),  # the second began
        (1.7, MarkerKind.RESUME, None),
        (1.7, MarkerKind.LIMIT, None),
    ]
    assert timeline.limit_at(1.69) is None  # no dispatch line: no limit before it was set
    assert timeline.limit_at(1.71) == 2  # 1.6 + 0.1, in floating point just past 1.7


def test_the_rail_has_each_end_with_its_outcome(tmp_path: Path) -> None:
    _source, timeline = steered(tmp_path)
    ends = {
        span.rollout_id: (None if span.end is None else round(span.end, 3), span.outcome)
        for span in timeline.spans.values()
    }
    assert ends == {
        OLD: (0.0, "success"),  # journaled before the recording: at its start, never in flight
        A: (1.2, "success"),
        B: (1.0, "cancelled"),
        C: (1.1, "untracked"),
        D: (1.5, "cancelled"),
        M: (1.3, "success"),
        D2: (2.1, "success"),
        B2: (2.2, "failure"),
    }
    cells = timeline.finished_columns(0.0, 2.4, 2)
    assert cells == [
        {"success": 1, "cancelled": 1, "untracked": 1},
        {"success": 3, "cancelled": 1, "failure": 1},
    ]


def test_peaks_keep_a_spike_narrower_than_a_column(tmp_path: Path) -> None:
    """Over 8 s in 2 columns, the four-second column holds both rollouts at its most."""
    timeline = timeline_of_recording(read_recording(write_recording(tmp_path, SLOW), []))
    assert timeline.peaks(0.0, 8.0, 2) == [2, 1]
    assert timeline.count_at(4.0) == 1  # b ended at 4.0: not in flight at its end
    assert timeline.peaks(0.0, 8.0, 8) == [2, 2, 2, 2, 1, 1, 1, 1]


def test_a_rollout_never_admitted_is_a_refusal_never_in_flight(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "transitions.jsonl",
        [
            {"kind": "session", "t": 0.0},
            {"kind": "dispatch", "max_in_flight": 4, "t": 0.0},
            {"kind": "not_admitted", "rollout_id": A, "t": 1.0, "error": "refused"},
            {"kind": "status", "rollout_id": B, "status": "queued", "t": 1.0},
        ],
    )
    timeline = timeline_of_recording(read_recording(path, []))
    assert timeline.in_flight_at(1.0) == [B]
    assert timeline.refusals == [(1.0, "")]
    assert timeline.limit_at(0.0) == 4


def test_a_replay_flags_stuck_where_its_board_does(tmp_path: Path) -> None:
    """a runs for 100 s while b and c take a second each: the board's rule (three times the
    median, at least 30 s) flags a 30 s into its running, and the time line has it there once
    the replay has played past it, however often it is played."""
    path = write_recording(
        tmp_path,
        [
            (0.0, A, 0, "queued"),
            (0.0, B, 1, "queued"),
            (1.0, A, 0, "running"),
            (1.0, B, 1, "running"),
            (2.0, B, 1, "success"),
            (2.0, C, 2, "queued"),
            (2.5, C, 2, "running"),
            (3.5, C, 2, "success"),
            (101.0, A, 0, "success"),
        ],
    )
    source = ReplaySource(path)
    assert not source.timeline.markers  # nothing played yet
    source.seek(31.5)
    assert [(m.t, m.kind, m.rollout_id) for m in source.timeline.markers] == [
        (31.0, MarkerKind.STUCK, A)
    ]
    assert source.board.is_stuck(source.board.records[A], source.clock())
    source.seek(30.5)
    assert not source.board.is_stuck(source.board.records[A], source.clock())
    source.to_end()
    assert [m.rollout_id for m in source.timeline.markers] == [A]


def test_an_official_run_folders_timeline_is_its_logs(tmp_path: Path) -> None:
    """An official run folder (no recording): each rollout in flight from its dispatch line
    until its result line; the one cut off by the interrupt until its item was sent again."""
    source = ReplaySource(official_run(tmp_path / "r1"))
    timeline = source.timeline
    assert timeline.in_flight_at(0.0) == [FAILED, OK1]  # the first dispatch is the origin
    assert timeline.in_flight_at(0.1) == [FAILED, OK1, CUT]  # the failure ends at 0.203
    assert timeline.in_flight_at(0.21) == [OK1, CUT, SKIPPED]
    assert timeline.in_flight_at(0.3) == [CUT]
    resumed = 178.487  # 08:50:00.000 less the first dispatch, 08:47:01.513
    assert timeline.in_flight_at(resumed) == [OK2, OK0]  # CUT ended as its item was sent again
    assert timeline.spans[CUT].outcome == "untracked"
    for t in (0.0, 0.1, 0.3, 100.0, resumed, resumed + 0.25):
        source.seek(t)
        assert sorted(timeline.in_flight_at(t)) == sorted(
            r.rollout_id for r in source.board if r.in_flight
        )
