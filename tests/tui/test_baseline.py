"""A live run compared with a baseline (`eval --baseline`), on the dashboard: the base column
says the baseline's outcome for each row's work item, a row that regressed is tinted, the
summary strip counts improved, regressed and compared items as they finish, the base column
sorts, and a dashboard attached to the run shows the same. Real runs against a real
server_stub: the baseline is a finished run of the same dataset file, whose grader failed
other rows than the live run's does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from rich.color import Color

from core.eval import EvalRequest, EvalSession, prepare
from core.serving.loopback import serve_in_loop
from server_stub import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    ConcurrencyConfig,
    Grader,
    GraderContext,
    LocalBackend,
    create_rollout_server,
)
from tests.polling import eventually
from tests.tui.helpers import (
    CHAT_URL,
    SIZE,
    LiveFactory,
    make_app,
    row_text,
    screen_lines,
    text_of,
    until,
)
from tests.tui.test_attach import attached, running
from tui.app import DashboardApp
from tui.widgets.table.row_states import REGRESSED

ROWS = [{"user_prompt": f"item {k}", "ground_truth": "42", "metadata": {"id": k}} for k in range(4)]


def scripted(
    *, failing: set[int], slow: frozenset[int] = frozenset()
) -> tuple[type[Any], type[Any]]:
    """A workflow that answers at once (after 30 s for the ids in `slow`) and a grader that
    fails the ids in `failing`: two runs of one dataset that come to different outcomes."""

    class Answer(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
            if (ctx.metadata or {}).get("id") in slow:
                await asyncio.sleep(30)
            answer = {"role": "assistant", "content": "42"}
            return AgentWorkflowOutput(messages=[*ctx.prompt, answer])

    class Verdict(Grader):
        async def grade(self, ctx: GraderContext) -> None:
            ctx.set_reward(0.0 if (ctx.metadata or {}).get("id") in failing else 1.0)

    return Answer, Verdict


def write_rows(tmp_path: Path) -> Path:
    """The dataset file, byte for byte as the `live_eval` fixture writes it."""
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return dataset


async def baseline_run(tmp_path: Path, *, failing: set[int]) -> Path:
    """A finished run `base` of ROWS under tmp_path/out, its grader failing `failing`."""
    workflow, grader = scripted(failing=failing)
    backend = LocalBackend(
        workflow=workflow,
        grader=grader,
        workflow_config=AgentWorkflowConfig(
            name="base", concurrency=ConcurrencyConfig(max_concurrent=8)
        ),
    )
    server = create_rollout_server(
        backend=backend, configure_logging=False, result_wait_timeout_sec=0.3
    )
    async with serve_in_loop(server) as url:
        plan = prepare(
            EvalRequest(
                servers=(url,),
                dataset_file=write_rows(tmp_path),
                output=tmp_path / "out",
                name="base",
                chat_url=CHAT_URL,
            )
        )
        summary = await EvalSession(plan).run()
    assert summary.complete
    return summary.folder


def row_of(app: DashboardApp, item: int) -> str:
    return next(r.rollout_id for r in app.board if r.source_row_index == item)


def base_cell(app: DashboardApp, item: int) -> str:
    """The base column's text in `item`'s row."""
    line = row_text(app, row_of(app, item))
    header = app.table.render_line(0).text
    start = header.index("base")
    return line[start : start + 9].strip()


def background(app: DashboardApp, item: int) -> Color | None:
    """The background in the middle of `item`'s row (the rows' tint)."""
    table = app.table
    y = table.order.index(row_of(app, item)) - int(table.scroll_offset.y) + 1
    segment = [s for s in table.render_line(y) if s.text.strip()][3]
    assert segment.style is not None
    return segment.style.bgcolor


def base_colour(app: DashboardApp, item: int) -> Color | None:
    """The colour of the base cell's text in `item`'s row."""
    table = app.table
    y = table.order.index(row_of(app, item)) - int(table.scroll_offset.y) + 1
    cell = next(s for s in table.render_line(y) if s.text.strip() in ("✔ pass", "✘ fail"))
    assert cell.style is not None
    return cell.style.color


def strip(app: DashboardApp) -> str:
    """The summary strip as the terminal shows it (its padding is not the text's end)."""
    region = app.summary.region
    return " ".join(" ".join(screen_lines(app)[region.y : region.bottom]).split())


# Item 0 passed in the baseline and fails now (regressed), item 1 the other way (improved),
# item 2 passes in both, item 3 passed there and is still in flight here (not counted yet).
BASELINE_FAILING, LIVE_FAILING, LIVE_SLOW = {1}, {0}, frozenset({3})


async def test_the_base_column_the_tint_and_the_strip_count_against_the_baseline(
    live_eval: LiveFactory, tmp_path: Path
) -> None:
    await baseline_run(tmp_path, failing=BASELINE_FAILING)
    workflow, grader = scripted(failing=LIVE_FAILING, slow=LIVE_SLOW)
    async with live_eval(ROWS, workflow=workflow, grader=grader, baseline="base") as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(live.source.session.results) == 3)
            await until(pilot, lambda: "3 compared" in strip(app))
            assert "vs baseline: +1 improved, −1 regressed, 3 compared" in strip(app)
            header = app.table.render_line(0).text
            assert "base" in header.split()
            # Every row on the table (the repaint takes the board's changes a moment later).
            await until(
                pilot,
                lambda: (
                    {r.source_row_index for r in app.board if r.rollout_id in app.table.order}
                    >= set(range(4))
                ),
            )
            cells = {item: base_cell(app, item) for item in range(4)}
            assert cells == {0: "✔ pass", 1: "✘ fail", 2: "✔ pass", 3: "✔ pass"}
            # The regressed row stands out; the improved and unchanged ones do not (the
            # cursor, whose colour is no tint, on the row in flight).
            app.table.move_cursor_to(row_of(app, 3))
            await pilot.pause()
            regressed = app.table.get_component_rich_style(REGRESSED).bgcolor
            assert background(app, 0) == regressed
            assert regressed not in {background(app, item) for item in (1, 2)}
            # The base cell says which way it changed: red regressed, green improved.
            assert base_colour(app, 0) == Color.parse("red")
            assert base_colour(app, 1) == Color.parse("green")
            assert base_colour(app, 2) not in {Color.parse("red"), Color.parse("green")}
            # B sorts by the base column: what changed first, the regression before all.
            await pilot.press("B")
            order = [app.board.records[rid].source_row_index for rid in app.table.order]
            assert order == [0, 1, 2, 3], order  # the one in flight has not changed yet
            assert "base ▲" in text_of(app.status_line)


async def test_without_a_baseline_there_is_no_base_column_nor_count(
    live_eval: LiveFactory,
) -> None:
    workflow, grader = scripted(failing=set())
    async with live_eval(ROWS, workflow=workflow, grader=grader) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(live.source.session.results) == 4)
            await pilot.pause()
            assert "base" not in app.table.render_line(0).text.split()
            assert "vs baseline" not in strip(app)
            await pilot.press("B")  # its key does nothing here
            assert app.sort.column is None


async def test_an_attached_dashboard_shows_the_base_column_and_the_runs_count(
    live_eval: LiveFactory, tmp_path: Path
) -> None:
    await baseline_run(tmp_path, failing=BASELINE_FAILING)
    workflow, grader = scripted(failing=LIVE_FAILING, slow=LIVE_SLOW)
    async with (
        live_eval(ROWS, workflow=workflow, grader=grader, baseline="base") as live,
        running(live),
    ):
        session = live.source.session
        await eventually(lambda: len(session.results) == 3, "three results")
        app = await attached(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "3 compared" in strip(app))
            assert "vs baseline: +1 improved, −1 regressed, 3 compared" in strip(app)
            await until(pilot, lambda: len(app.board) == 4)
            await pilot.pause()
            cells = {item: base_cell(app, item) for item in range(4)}
            assert cells == {0: "✔ pass", 1: "✘ fail", 2: "✔ pass", 3: "✔ pass"}
            app.table.move_cursor_to(row_of(app, 3))
            await pilot.pause()
            regressed = app.table.get_component_rich_style(REGRESSED).bgcolor
            assert background(app, 0) == regressed


async def test_a_resumed_run_counts_the_items_it_carried_over_against_the_baseline(
    live_eval: LiveFactory, tmp_path: Path
) -> None:
    """The strip counts the run, as its progress does: the items finished by an earlier
    invocation are counted from the start, though this session's table has only the rest."""
    await baseline_run(tmp_path, failing=BASELINE_FAILING)
    workflow, grader = scripted(failing=LIVE_FAILING, slow=LIVE_SLOW)
    async with live_eval(ROWS, workflow=workflow, grader=grader, baseline="base") as first:
        session = first.source.session
        task = asyncio.ensure_future(first.source.run())
        await eventually(lambda: len(session.results) == 3, "three results")
        await session.interrupt(cancel_in_flight=True)
        await task
    async with live_eval(ROWS, workflow=workflow, grader=grader, baseline="base") as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(app.board) == 1 and "running 1" in strip(app))
            await until(pilot, lambda: "3 compared" in strip(app))
            assert "vs baseline: +1 improved, −1 regressed, 3 compared" in strip(app)
