"""The rows × attempts grid (`a`, issue 25 item 6): a line per dataset row, a glyph per
attempt, the rows that pass only sometimes first; live as rollouts finish, on a dashboard
attached to the run, and in a replay of the run's own recording, with the pass@k its
metrics.json says. Live runs against a real server_stub whose workflow answers each row right
a known number of times (`PassesFirst`), whatever order its attempts run in.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any
from uuid import uuid4

from textual.pilot import Pilot

from core.eval.results.metrics import k_values
from core.eval.results.records import ItemResult
from server_stub import AgentWorkflow, AgentWorkflowOutput
from server_stub.workflow import AgentWorkflowContext
from tests.polling import eventually
from tests.tui.helpers import (
    SIZE,
    LiveFactory,
    make_app,
    row,
    screen_lines,
    status_line,
    text_of,
    until,
)
from tests.tui.recordings import replay_app, write_jsonl, write_recording
from tests.tui.test_attach import attached, running
from tui.app import DashboardApp
from tui.bindings import help_lines, palette_commands
from tui.screens.attempt_grid import ONE_ATTEMPT, AttemptGridScreen
from tui.screens.dialogs import HelpScreen, QuitScreen
from tui.widgets.grid.grid_view import AttemptGridView, header_cells, layout

GRID_TOOLTIP = "Rows × attempts grid: rows passing only sometimes first"
#: Answers so far per row key (`PassesFirst`): the workflow runs in this process.
_ANSWERED: Counter[str] = Counter()
LINE = re.compile(
    r"^\s*(\d+)\s+(flaky|always fail|always pass|all skipped|unfinished)\s+(\S+)\s+(\S+)"
)


class PassesFirst(AgentWorkflow[Any]):
    """Answers its row right ("42") the first metadata["passes"] times it runs it, wrong
    after (or raises, with metadata["raise"]; or first sleeps metadata["sleep"] seconds)."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        meta = ctx.metadata or {}
        await asyncio.sleep(float(meta.get("sleep", 0)))
        if "raise" in meta:
            raise RuntimeError("boom")
        _ANSWERED[meta["key"]] += 1
        right = _ANSWERED[meta["key"]] <= int(meta.get("passes", 0))
        answer = {"role": "assistant", "content": "42" if right else "41"}
        return AgentWorkflowOutput(messages=[*ctx.prompt, answer])


def passing(times: int, **metadata: Any) -> dict[str, Any]:
    """A row answered right `times` times (a key of its own: each test counts afresh)."""
    return row(key=uuid4().hex, passes=times, **metadata)


def finishing() -> list[dict[str, Any]]:
    """Rows 0-3: passes 2 of 4 (flaky), never, always, and an error each time."""
    return [passing(2), passing(0), passing(4), passing(0, **{"raise": "runtime"})]


def grid_screen(app: DashboardApp) -> AttemptGridScreen:
    screen = app.screen
    assert isinstance(screen, AttemptGridScreen)
    return screen


def grid_lines(app: DashboardApp) -> list[str]:
    """The grid's lines as drawn, its column header first."""
    view = grid_screen(app).query_one(AttemptGridView)
    return [view.render_line(y).text.rstrip() for y in range(view.size.height)]


def grid_rows(app: DashboardApp) -> list[tuple[str, str, str, str]]:
    """Each row drawn, in the grid's order: (row, class, glyphs, passes)."""
    rows = []
    for line in grid_lines(app)[1:]:
        found = LINE.match(line)
        if found:
            label, row_class, glyphs, passes = found.groups()
            rows.append((label, row_class, glyphs, passes))
    return rows


def shapes(app: DashboardApp) -> list[tuple[str, str, str, str]]:
    """`grid_rows` with each row's glyphs sorted: which attempt passed depends on the order
    they ran in; how many did does not."""
    return [(label, cls, "".join(sorted(glyphs)), p) for label, cls, glyphs, p in grid_rows(app)]


def header(app: DashboardApp) -> str:
    screen = grid_screen(app)
    return "\n".join(
        text_of(screen.query_one(f"#{name}")) for name in ("grid-counts", "grid-pass-at-k")
    )


async def open_grid(pilot: Pilot[Any], app: DashboardApp) -> None:
    await pilot.press("a")
    await until(pilot, lambda: isinstance(app.screen, AttemptGridScreen))


async def test_the_grid_follows_a_live_run_flaky_rows_first_and_enter_shows_a_rows_rollouts(
    live_eval: LiveFactory,
) -> None:
    rows = [*finishing(), passing(4, sleep=30)]  # row 4 stays in flight
    async with live_eval(rows, n=4, workflow=PassesFirst) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await open_grid(pilot, app)  # before anything has finished: it fills in live
            await until(pilot, lambda: len(grid_rows(app)) == 5 and "◉◉◉◉" in str(grid_rows(app)))
            await until(
                pilot,
                lambda: (
                    shapes(app)
                    == [
                        ("0", "flaky", "✔✔✘✘", "2/4"),
                        ("1", "always fail", "✘✘✘✘", "0/4"),
                        ("3", "always fail", "!!!!", "0/4"),
                        ("2", "always pass", "✔✔✔✔", "4/4"),
                        ("4", "unfinished", "◉◉◉◉", "-"),
                    ]
                ),
            )
            said = header(app)
            assert "1 flaky · 2 always fail · 1 always pass · 1 unfinished" in said, said
            # pass@1 = (2/4 + 0 + 1 + 0) / 4; pass@2 = (5/6 + 0 + 1 + 0) / 4: row 4 has none.
            assert "pass@1 0.38 · pass@2 0.46 · pass@4 0.50" in said, said
            assert "(pass: reward ≥ 1)" in said

            await pilot.press("enter")  # the cursor starts on the first row: the flaky one
            await until(pilot, lambda: not isinstance(app.screen, AttemptGridScreen))
            shown = [app.board.records[rid] for rid in app.table.order]
            assert len(shown) == 4
            assert sorted(r.run_index for r in shown if r.run_index is not None) == [0, 1, 2, 3]
            assert {r.row_index for r in shown} == {0}
            assert app.table.cursor_id in app.table.order
            assert "row 0" in status_line(app)
            await pilot.press("escape")  # leaves the row, as it leaves a text filter
            await until(pilot, lambda: len(app.table.order) == len(app.board))
            assert "row 0" not in status_line(app)

            # Over the grid, `?` is the dashboard's help and `q` its quit, which asks first.
            await open_grid(pilot, app)
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen))
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, AttemptGridScreen))
            await pilot.press("q")
            await until(pilot, lambda: isinstance(app.screen, QuitScreen))


async def test_the_grid_says_what_metrics_json_says_and_a_replay_of_the_run_draws_it_again(
    live_eval: LiveFactory,
) -> None:
    async with live_eval(finishing(), n=4, workflow=PassesFirst) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.source.ending is not None, timeout=20)
            await open_grid(pilot, app)
            await until(pilot, lambda: len(grid_rows(app)) == 4)
            live_lines, live_header = grid_lines(app), header(app)
        folder = live.folder
    metrics = json.loads((folder / "metrics.json").read_text())["summary"]
    points = " · ".join(f"pass@{p['k']} {p['value']:.2f}" for p in metrics["pass_at_k"])
    assert points in live_header, (points, live_header)
    assert "1 flaky · 2 always fail · 1 always pass · 0 unfinished" in live_header

    replay, _source = replay_app(folder, speed=4.0)
    async with replay.run_test(size=SIZE) as pilot:
        await open_grid(pilot, replay)  # at once: it fills in as the recording plays
        # Attempt by attempt, as the live run drew it: the same rows, glyphs and pass@k.
        await until(pilot, lambda: grid_lines(replay) == live_lines)
        assert header(replay) == live_header


async def test_an_attached_dashboard_has_the_runs_grid(live_eval: LiveFactory) -> None:
    rows = [passing(2), passing(4), passing(4, sleep=30)]
    async with live_eval(rows, n=4, workflow=PassesFirst) as live, running(live):
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await open_grid(pilot, app)
            await until(
                pilot,
                lambda: (
                    shapes(app)
                    == [
                        ("0", "flaky", "✔✔✘✘", "2/4"),
                        ("1", "always pass", "✔✔✔✔", "4/4"),
                        ("2", "unfinished", "◉◉◉◉", "-"),
                    ]
                ),
            )
            assert "(pass: reward ≥ 1)" in header(app)  # the run's threshold, from its folder


async def test_with_one_attempt_per_row_the_grid_says_what_it_needs(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([passing(1), passing(0)], workflow=PassesFirst) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            # Its key is in the help and in the command palette, as every key.
            assert ("a", GRID_TOOLTIP) in help_lines(app)
            assert "Attempts grid" in [command.title for command in palette_commands(app)]
            await open_grid(pilot, app)
            await until(pilot, lambda: ONE_ATTEMPT in " ".join(" ".join(screen_lines(app)).split()))
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, AttemptGridScreen))


def _result(rollout_id: str, row_index: int, run_index: int, **fields: Any) -> dict[str, Any]:
    return ItemResult(
        row_index=row_index,
        run_index=run_index,
        rollout_id=rollout_id,
        source_row_index=row_index,
        duration_ms=100.0,
        tokens=None,
        **fields,
    ).to_json()


async def test_a_replay_counts_its_runs_threshold_and_shows_skipped_attempts(
    tmp_path: Path,
) -> None:
    """A recording's results as the journal has them: a skipped sample is skipped (no fail),
    and a reward passes by the threshold the run's metrics.json says (0.5 here)."""
    folder = tmp_path / "run"
    ids = {(r, a): f"{r}{a}".ljust(32, "0") for r in range(2) for a in range(2)}
    statuses = [(0.1 * i, rid, r, "queued") for i, ((r, _a), rid) in enumerate(ids.items())]
    statuses += [(1 + 0.1 * i, rid, r, "success") for i, ((r, _a), rid) in enumerate(ids.items())]
    write_recording(folder, statuses)
    # The recording's attempts: write_recording says attempt 0; each id's own attempt here.
    lines = [json.loads(line) for line in (folder / "transitions.jsonl").read_text().splitlines()]
    attempt = {rid: a for (_r, a), rid in ids.items()}
    for line in lines[1:]:
        line["run_index"] = attempt[line["rollout_id"]]
    write_jsonl(folder / "transitions.jsonl", lines)
    write_jsonl(
        folder / "events.jsonl",
        [
            _result(ids[0, 0], 0, 0, status="success", reward=0.6, error_type=None),
            _result(ids[0, 1], 0, 1, status="skipped", reward=None, error_type=None),
            _result(ids[1, 0], 1, 0, status="success", reward=0.6, error_type=None),
            _result(ids[1, 1], 1, 1, status="success", reward=0.4, error_type=None),
        ],
    )
    (folder / "metrics.json").write_text(
        json.dumps({"eval_run": {"status": "finished"}, "summary": {"pass_threshold": 0.5}})
    )
    (folder / "manifest.json").write_text(
        json.dumps(
            {"inputs": {"dataset": {"sha256": "0" * 64, "selected_source_rows": "0-1"}, "n": 2}}
        )
    )
    app, source = replay_app(folder)
    source.to_end()
    async with app.run_test(size=SIZE) as pilot:
        await open_grid(pilot, app)
        await until(pilot, lambda: len(grid_rows(app)) == 2)
        assert grid_rows(app) == [("1", "flaky", "✔✘", "1/2"), ("0", "always pass", "✔-", "1/1")]
        assert "(pass: reward ≥ 0.5)" in header(app)


async def resumed_after_one_row(live_eval: LiveFactory, rows: list[dict[str, Any]]) -> None:
    """A first invocation of `rows` × 2, stopped once row 0's two attempts have their results
    (the other rows sleep): the resume carries them over, on no board of its own."""
    async with live_eval(rows, n=2, workflow=PassesFirst) as first:
        session = first.source.session
        task = asyncio.ensure_future(first.source.run())
        await eventually(lambda: len(session.results) == 2, "row 0's results")
        await session.interrupt(cancel_in_flight=True)
        await task


async def test_a_resumed_run_shows_the_results_it_carried_over(live_eval: LiveFactory) -> None:
    rows = [passing(1), passing(2, sleep=30)]
    await resumed_after_one_row(live_eval, rows)
    async with live_eval(rows, n=2, workflow=PassesFirst) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.board.counts()["running"] == 2)
            await open_grid(pilot, app)
            await until(
                pilot,
                lambda: (
                    shapes(app) == [("0", "flaky", "✔✘", "1/2"), ("1", "unfinished", "◉◉", "-")]
                ),
            )
            assert "1 flaky · 0 always fail · 0 always pass · 1 unfinished" in header(app)


async def test_an_attached_dashboard_shows_the_results_a_resumed_run_carried_over(
    live_eval: LiveFactory,
) -> None:
    rows = [passing(1), passing(2, sleep=30)]
    await resumed_after_one_row(live_eval, rows)
    async with live_eval(rows, n=2, workflow=PassesFirst) as live, running(live):
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.board.counts()["running"] == 2)
            await open_grid(pilot, app)
            await until(
                pilot,
                lambda: (
                    shapes(app) == [("0", "flaky", "✔✘", "1/2"), ("1", "unfinished", "◉◉", "-")]
                ),
            )


def test_a_narrow_grid_drops_pass_at_k_columns_before_it_cuts_attempts() -> None:
    """At 80 columns (78 inside the scrollbar): 16 attempts all shown, pass@16 gives way;
    100 attempts keep only pass@1 and are cut with a mark; nothing is ever wider than the
    width."""
    sixteen = layout(78, 16, k_values(16))
    assert (sixteen.glyphs, sixteen.ks) == (16, (1, 2, 4, 8))
    hundred = layout(78, 100, k_values(100))
    assert hundred.ks == (1,) and hundred.glyphs < 100
    assert len(header_cells(hundred)) <= 78
    assert layout(158, 16, k_values(16)).ks == (1, 2, 4, 8, 16)
