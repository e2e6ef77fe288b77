"""The waterfall of one rollout (`core.eval.timing.waterfall`): its segments for known records
(every time hand-placed), the sub-phases of a server's diagnostics placed on the axis."""

from __future__ import annotations

import pytest

from core.board import RolloutBoard
from core.eval.results.diagnostics import TrialDiagnostics
from core.eval.timing.waterfall import Segment, Waterfall, waterfall
from tests.eval.timing.helpers import G, Q, R, S, call, polled, reported


def rows(model: Waterfall) -> list[tuple[object, ...]]:
    """The segments as tuples, their times rounded (the record's clock is a float's)."""
    return [
        (
            s.lane,
            s.kind,
            s.label,
            round(s.start, 6),
            round(s.end, 6),
            s.open,
            s.source,
            s.skipped,
            s.status,
            s.tokens,
        )
        for s in model.segments
    ]


def diagnostics(model: Waterfall) -> list[Segment]:
    return [segment for segment in model.segments if segment.lane == "diagnostics"]


def reported_rollout() -> RolloutBoard:
    """Sent at 9.5, admitted at 10.0; the server reported every status; three model calls,
    the last failing, an idle gap of 0.4 s between the first two and none worth a row
    (half a millisecond) before the third."""
    board = RolloutBoard()
    record = polled(board, "r", [(Q, 10.0), (S, 15.2)], reward=1.0)
    record.submitted_at = 9.5
    reported(board, "r", [(Q, 9.9), (R, 10.5), (G, 14.0), (S, 15.0)])
    call(board, "r", 10.6, 11.6, tokens=10)
    call(board, "r", 12.0, 13.0, tokens=20)
    call(board, "r", 13.0005, 13.8, status=500, tokens=None)
    return board


def test_a_reported_rollout_with_several_calls_has_every_segment_in_place() -> None:
    board = reported_rollout()
    model = waterfall(board.records["r"], now=100.0)
    assert model.origin == 9.5
    assert model.length == pytest.approx(5.5)
    assert rows(model) == [
        ("client", "admission", "admission", 0.0, 0.5, False, None, None, None, None),
        ("server", "phase", "queued", 0.4, 1.0, False, "server", None, None, None),
        ("server", "phase", "running", 1.0, 4.5, False, "server", None, None, None),
        ("server", "phase", "grading", 4.5, 5.5, False, "server", None, None, None),
        ("model", "call", "call #1", 1.1, 2.1, False, None, None, 200, 10),
        ("model", "idle", "idle", 2.1, 2.5, False, None, None, None, None),
        ("model", "call", "call #2", 2.5, 3.5, False, None, None, 200, 20),
        ("model", "call", "call #3", 3.5005, 4.3, False, None, None, 500, None),
        ("server", "terminal", "success", 5.5, 5.5, False, None, None, None, None),
    ]
    assert model.calls_not_kept == 0


def test_grading_that_no_source_saw_is_a_row_without_a_bar_that_says_why() -> None:
    board = RolloutBoard()
    polled(board, "g", [(Q, 0.0), (S, 2.0)], reward=1.0)
    call(board, "g", 0.5, 1.5)  # proves running from 0.5
    model = waterfall(board.records["g"], now=50.0)
    assert rows(model) == [
        ("server", "phase", "queued", 0.0, 0.5, False, "poll", None, None, None),
        ("server", "phase", "running", 0.5, 2.0, False, "model", None, None, None),
        ("server", "skipped", "grading", 2.0, 2.0, False, None, "not_observed", None, None),
        ("model", "call", "call #1", 0.5, 1.5, False, None, None, 200, 10),
        ("server", "terminal", "success", 2.0, 2.0, False, None, None, None, None),
    ]


def test_a_rollout_in_flight_ends_its_phase_and_its_waiting_call_at_now() -> None:
    board = RolloutBoard()
    polled(board, "w", [(Q, 0.0), (R, 1.0)])
    call(board, "w", 1.5, None)
    model = waterfall(board.records["w"], now=5.0)
    assert model.length == 5.0
    assert rows(model) == [
        ("server", "phase", "queued", 0.0, 1.0, False, "poll", None, None, None),
        ("server", "phase", "running", 1.0, 5.0, True, "poll", None, None, None),
        ("model", "call", "call #1", 1.5, 5.0, True, None, None, None, None),
    ]


HARBOR = TrialDiagnostics(
    backend="harbor",
    phases=(("environment_setup", 0.5), ("agent_setup", 0.25), ("agent", 2.0), ("verifier", 1.0)),
    total=4.0,
)


def test_diagnostics_join_with_the_verifier_starting_at_the_grading_mark() -> None:
    board = reported_rollout()
    model = waterfall(board.records["r"], now=100.0, diagnostics=HARBOR)
    assert model.diagnostics_backend == "harbor"
    # Grading began at 4.5 on the axis: the verifier then, the rest end to end before it.
    assert [(s.label, round(s.start, 6), round(s.end, 6)) for s in diagnostics(model)] == [
        ("trial", 1.75, 5.75),
        ("environment_setup", 1.75, 2.25),
        ("agent_setup", 2.25, 2.5),
        ("agent", 2.5, 4.5),
        ("verifier", 4.5, 5.5),
    ]
    assert model.length == pytest.approx(5.75)


def test_diagnostics_without_a_grading_mark_end_at_the_terminal_mark() -> None:
    board = RolloutBoard()
    polled(board, "n", [(Q, 0.0), (R, 1.0), (S, 6.0)], grade=False)
    timings = TrialDiagnostics(backend=None, phases=(("setup", 1.0), ("work", 3.0)), total=None)
    model = waterfall(board.records["n"], now=9.0, diagnostics=timings)
    assert [(s.label, s.start, s.end) for s in diagnostics(model)] == [
        ("setup", 2.0, 3.0),
        ("work", 3.0, 6.0),
    ]
    assert [s.skipped for s in model.segments if s.kind == "skipped"] == ["not_requested"]


def test_a_rollout_never_admitted_is_only_its_terminal_mark() -> None:
    board = RolloutBoard()
    board.record_not_admitted("x", "refused", submitted_at=3.0)
    model = waterfall(board.records["x"], now=9.0)
    assert [s for s in model.segments if s.kind != "skipped"] == [
        Segment("server", "terminal", "not admitted", 0.0, 0.0)
    ]
