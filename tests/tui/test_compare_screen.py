"""The compare screen as a user drives it, on run folders written by the results room's own
writers (tests/tui/compare_states.py: which rows differ and how): the rows that differ
first, a class filter, the next and previous difference, both sides of a row (beside each
other, or one above the other on a narrow terminal), the help, and the runs screen that
picks A and B."""

from __future__ import annotations

from pathlib import Path

from textual.widget import Widget
from textual.widgets import DataTable, Static

from core.eval.attach.run_list import list_runs
from tests.tui.compare_states import CHANGED_ROWS, comparison_of, write_runs
from tests.tui.helpers import text_of
from tui.compare_app import CompareApp, RunsChoice, create_compare_app
from tui.screens.compare import CompareScreen
from tui.screens.dialogs import HelpScreen
from tui.screens.row_sides import RowSidesScreen
from tui.screens.runs import RunsScreen


def shown_rows(app: CompareApp) -> list[int]:
    screen = app.screen
    assert isinstance(screen, CompareScreen)
    return [row.source_row for row in screen.table.rows]


def cursor_row(app: CompareApp) -> int | None:
    screen = app.screen
    assert isinstance(screen, CompareScreen)
    row = screen.table.cursor_row
    return None if row is None else row.source_row


def rendered(widget: Widget) -> str:
    """What a widget draws, as one text (its lines joined by spaces: wrapped text reads on)."""
    return " ".join(text_of(widget).split())


async def test_rows_that_differ_come_first_and_a_class_key_filters_them(tmp_path: Path) -> None:
    app = create_compare_app(comparison_of(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        assert shown_rows(app)[:4] == CHANGED_ROWS
        assert sorted(shown_rows(app)) == list(range(8))
        await pilot.press("1")  # regressed
        assert shown_rows(app) == [1, 5]
        await pilot.press("3")  # error_changed
        assert shown_rows(app) == [4]
        await pilot.press("3")  # again: every row
        assert len(shown_rows(app)) == 8
        await pilot.press("6")  # pending: row 7's second attempt has no result in A
        assert shown_rows(app) == [7]
        await pilot.press("escape")  # leaves the filter
        assert len(shown_rows(app)) == 8


async def test_the_cycle_key_goes_through_the_classes_then_back_to_all(tmp_path: Path) -> None:
    app = create_compare_app(comparison_of(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        chosen = []
        for _ in range(10):  # the nine classes, then all
            await pilot.press("c")
            chosen.append((screen.chosen, len(shown_rows(app))))
        assert chosen[:3] == [("regressed", 2), ("improved", 1), ("error_changed", 1)]
        assert chosen[-1] == (None, 8)
        chips = rendered(screen.query_one("#class-chips", Static))
        assert "1 regressed 3" in chips and "2 improved 1" in chips and "6 pending 1" in chips


async def test_next_and_previous_difference_move_between_changed_rows(tmp_path: Path) -> None:
    app = create_compare_app(comparison_of(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        assert cursor_row(app) == 1
        seen = []
        for _ in range(4):
            await pilot.press("n")
            seen.append(cursor_row(app))
        assert seen == [5, 2, 4, 4]  # no changed row after row 4: the cursor stays
        await pilot.press("p")
        assert cursor_row(app) == 2
        await pilot.press("left_square_bracket")
        assert cursor_row(app) == 5
        await pilot.press("end")  # past every changed row
        await pilot.press("p")
        assert cursor_row(app) == 4


async def test_the_header_says_the_verdict_its_interval_and_the_notes(tmp_path: Path) -> None:
    app = create_compare_app(comparison_of(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        header = rendered(app.screen.query_one("#compare-header", Static))
        assert "B passes 2 fewer work items of 14 compared" in header
        assert "95% CI" in header and "paired bootstrap over rows" in header
        assert "A before osmosis" in header and "8 rows × 2" in header and "pass ≥ 1" in header


async def test_enter_opens_both_sides_of_the_row_and_escape_goes_back(tmp_path: Path) -> None:
    app = create_compare_app(comparison_of(tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        await pilot.press("n")  # row 5: regressed in both attempts
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RowSidesScreen)
        assert screen.row.source_row == 5 and screen.attempts == [0, 1]
        assert not screen.has_class("-narrow")
        pairs = list(screen.query(".pair"))
        assert len(pairs) == 2
        first_a, first_b = (rendered(side) for side in pairs[0].query(".transcript"))
        # A's model answered 16 * 8 right, B's did not; each side its own transcript.
        assert "128" in first_a and "129" not in first_a
        assert "129" in first_b
        facts_b = rendered(pairs[0].query(".facts").last())
        assert "failure" in facts_b and "after-5-0" in facts_b
        # A's second attempt left no trajectory: said, not hidden.
        second_a = rendered(pairs[1].query(".transcript").first())
        assert "no trajectory in rollout_trials/before-5-1/trajectory.json" in second_a
        # Beside each other: B's side starts to the right of A's, on the same line.
        side_a, side_b = pairs[0].query(".side")
        assert side_b.region.x > side_a.region.x and side_b.region.y == side_a.region.y
        await pilot.press("escape")
        assert isinstance(app.screen, CompareScreen) and cursor_row(app) == 5


async def test_on_a_narrow_terminal_the_two_sides_stand_one_above_the_other(
    tmp_path: Path,
) -> None:
    app = create_compare_app(comparison_of(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("enter")  # row 1
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RowSidesScreen)
        assert screen.has_class("-narrow")
        side_a, side_b = screen.query(".pair").first().query(".side")
        assert side_b.region.x == side_a.region.x and side_b.region.y > side_a.region.y
        await pilot.resize_terminal(160, 45)
        await pilot.pause()
        assert not screen.has_class("-narrow")


async def test_the_help_lists_the_keys_of_the_screen_shown(tmp_path: Path) -> None:
    app = create_compare_app(comparison_of(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        keys = dict(help_screen.bindings_shown)
        assert keys["n, ]"] == "The next row that changed from A to B"
        assert keys["1 … 9"].startswith("Show only the rows with a work item of one class")
        assert "q" in keys and "?, f1" in keys
        await pilot.press("escape", "enter", "question_mark")
        await pilot.pause()
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        keys = dict(help_screen.bindings_shown)
        assert keys["n, ]"] == "Scroll to the row's next attempt"
        assert keys["esc"] == "Back to the compared rows"
        assert keys["↑ ↓ pgup pgdn home end"] == "Move the cursor, or scroll"


async def test_the_runs_screen_picks_a_then_b_and_comes_back(tmp_path: Path) -> None:
    write_runs(tmp_path)
    app = create_compare_app(runs=RunsChoice(list_runs(tmp_path), tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        table = screen.query_one(DataTable)
        assert [str(table.get_row_at(i)[1]) for i in range(2)] == ["after", "before"]
        await pilot.press("enter")  # nothing marked: nothing to compare yet
        assert app.shown is None and isinstance(app.screen, RunsScreen)
        await pilot.press("down", "space")  # "before" is A
        assert screen.marks == [tmp_path / "before"]
        assert str(table.get_row_at(1)[0]) == "A"
        await pilot.press("up", "enter")  # the cursor's run, "after", is B
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        shown = app.shown
        assert shown is not None and (shown.a.name, shown.b.name) == ("before", "after")
        assert shown_rows(app)[:4] == CHANGED_ROWS
        await pilot.press("escape")
        assert app.screen is screen


async def test_a_run_given_on_the_command_line_is_b(tmp_path: Path) -> None:
    _before, after = write_runs(tmp_path)
    choice = RunsChoice(list_runs(tmp_path), tmp_path, given_b=after)
    app = create_compare_app(runs=choice)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        assert str(screen.query_one(DataTable).get_row_at(0)[0]) == "B"
        await pilot.press("enter")  # the cursor is on B itself
        assert app.shown is None
        await pilot.press("down", "enter")
        await pilot.pause()
        shown = app.shown
        assert shown is not None and (shown.a.name, shown.b.name) == ("before", "after")


async def test_an_incomparable_pick_is_said_and_the_list_stays(tmp_path: Path) -> None:
    from tests.eval.compare.folders import PASS, write_run

    write_run(tmp_path / "one", source_rows=[0, 1], results={(0, 0): PASS})
    write_run(tmp_path / "two", source_rows=[5, 6], results={(5, 0): PASS})
    app = create_compare_app(runs=RunsChoice(list_runs(tmp_path), tmp_path))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press("space", "enter")  # one (A) with two (B, under the cursor)
        await pilot.pause()
        assert app.screen is screen and app.shown is None
        await pilot.pause()
        toasts = [rendered(toast) for toast in app.screen.query("Toast.-error")]
        # The toast's first line: the reason goes on ("… row in common: nothing to compare").
        assert any("A (one) and B (two) have no source" in toast for toast in toasts)


async def test_notes_of_the_pairing_are_shown_and_unpaired_rows_listed(tmp_path: Path) -> None:
    from core.eval.compare.compared_run import read_compared_run
    from core.eval.compare.comparison import compare_runs
    from tests.eval.compare.folders import FAIL, PASS, write_run

    prompts = {0: "What is 2 * 3?", 1: "What is 4 * 5?", 2: "What is 6 * 7?"}
    results = {(0, 0): PASS, (1, 0): PASS, (2, 0): PASS}
    a = write_run(tmp_path / "a", source_rows=[0, 1, 2], results=results, prompts=prompts)
    b = write_run(
        tmp_path / "b",
        source_rows=[0, 1, 2],
        results={**results, (1, 0): FAIL},
        sha="b" * 64,
        prompts={**prompts, 2: "What is 8 * 9?"},
    )
    comparison = compare_runs(read_compared_run(a, label="A"), read_compared_run(b, label="B"))
    app = create_compare_app(comparison)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        header = rendered(app.screen.query_one("#compare-header", Static))
        assert "note: the runs read different dataset files" in header
        assert "note: 1 row whose content differs: listed, not compared" in header
        assert shown_rows(app) == [1, 0, 2]  # the regressed row, the same one, the other
        table = rendered(app.screen.query_one("#compare-table"))
        assert "2 1/1 → 1/1 1 → 1 1.0s → 1.0s content differs" in table


async def test_both_sides_say_an_attempt_one_run_does_not_have(tmp_path: Path) -> None:
    from core.eval.compare.compared_run import read_compared_run
    from core.eval.compare.comparison import compare_runs
    from tests.eval.compare.folders import PASS, write_run

    a = write_run(tmp_path / "a", source_rows=[0], results={(0, 0): PASS})
    b = write_run(tmp_path / "b", source_rows=[0], n=2, results={(0, 0): PASS, (0, 1): PASS})
    comparison = compare_runs(read_compared_run(a, label="A"), read_compared_run(b, label="B"))
    app = create_compare_app(comparison)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RowSidesScreen) and screen.attempts == [0, 1]
        second = screen.query(".pair").last()
        facts_a, facts_b = (rendered(facts) for facts in second.query(".facts"))
        assert "not in this run" in facts_a and "pass" in facts_b
        assert "only_in_B" in rendered(screen.query_one("#attempt-1", Static))
