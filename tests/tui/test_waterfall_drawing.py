"""How the waterfall is drawn (tui/widgets/waterfall.py): bars to an eighth of a cell at
their end and half a cell at their start, spans in milliseconds under a tenth of a second, a
run folder's unrecorded phases said once, and a width too narrow said rather than drawn."""

from __future__ import annotations

import pytest

from core.board import RolloutBoard
from core.eval.timing.waterfall import waterfall
from core.types import RolloutStatus
from tui.widgets.waterfall import bar_cells, span, waterfall_lines


@pytest.mark.parametrize(
    ("start", "end", "cells"),
    [
        (0.0, 2.5, {0: "█", 1: "█", 2: "▌"}),  # ends half way into its third cell
        (0.0, 2.125, {0: "█", 1: "█", 2: "▏"}),  # an eighth
        (1.5, 3.0, {1: "▐", 2: "█"}),  # starts half way into a cell
        (1.8, 3.0, {1: "▕", 2: "█"}),  # starts in its last quarter
        (1.1, 3.0, {1: "█", 2: "█"}),  # starts in its first quarter: the whole cell
        (4.2, 4.25, {4: "▏"}),  # shorter than an eighth: still seen
        (4.6, 4.65, {4: "▕"}),  # … on the half of the cell it is in
        (8.0, 30.0, {8: "█", 9: "█"}),  # cut at the axis' end
    ],
)
def test_bars_are_placed_to_eighths_and_halves(
    start: float, end: float, cells: dict[int, str]
) -> None:
    assert bar_cells(start, end, 10) == cells


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.0123, "12ms"), (0.0004, "1ms"), (0.0996, "0.1s"), (2.0, "2.0s")]
)
def test_spans_under_a_tenth_of_a_second_are_milliseconds(seconds: float, text: str) -> None:
    assert span(seconds) == text


def test_phases_no_file_recorded_are_said_once() -> None:
    board = RolloutBoard()
    board.observe("o", RolloutStatus.SUCCESS, 5.0, row_index=0, run_index=0, phases_recorded=False)
    lines = [line.plain for line in waterfall_lines(waterfall(board.records["o"], 9.0), 80)]
    assert "queued, running, grading: not recorded by the run's files" in lines
    assert sum("not recorded" in line for line in lines) == 1
    assert lines[-1].startswith("success") and "◆" in lines[-1]


def test_a_width_too_narrow_is_said() -> None:
    board = RolloutBoard()
    board.observe("n", RolloutStatus.QUEUED, 1.0, row_index=0, run_index=0)
    (line,) = waterfall_lines(waterfall(board.records["n"], 3.0), 20)
    assert line.plain.startswith("too narrow for the waterfall")
