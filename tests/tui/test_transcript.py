"""`t`: the selected rollout's transcript, from its live preview as the file changes, else from
its final sample; over a static board (previews written by the test) and over a live eval whose
server_stub writes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from tests.server.plugins import Narrating
from tests.tui.helpers import SIZE, LiveFactory, make_app, row, running_rollout, text_of, until
from tests.tui.states import rollout_id
from tests.tui.transcript_states import (
    RUNNING_ROW,
    calculator_steps,
    preview,
    transcript_app,
    write_preview,
)
from tui.app import DashboardApp
from tui.screens.dialogs import ConfirmScreen
from tui.screens.transcript import TranscriptScreen
from tui.sources.live import LiveSource
from tui.widgets.transcript import TranscriptView

FINISHED_ROW = 0  # success, its sample holding the conversation


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The view looks at the file every 0.1 s instead of every second; servers write a
    preview every 0.1 s instead of every 3 s."""
    monkeypatch.setattr("tui.widgets.transcript_panel.POLL_SEC", 0.1)
    monkeypatch.setattr("server_stub.previews.PREVIEW_INTERVAL_SEC", 0.1)


def header(app: DashboardApp) -> str:
    return text_of(app.screen.query_one("#transcript-header", Static))


def shown_steps(app: DashboardApp) -> str:
    return text_of(app.screen.query_one("#transcript-steps", Static))


async def open_on(app: DashboardApp, pilot: Any, row_index: int) -> None:
    app.table.move_cursor_to(rollout_id(row_index))
    await pilot.press("t")
    assert isinstance(app.screen, TranscriptScreen)


async def test_t_opens_the_live_preview_and_follows_the_file(tmp_path: Path) -> None:
    write_preview(tmp_path, preview(calculator_steps()[:2], version=1))
    app = transcript_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_on(app, pilot, RUNNING_ROW)
        assert "live preview v1" in header(app) and "running" in header(app)
        assert "What is 51 * 44?" in shown_steps(app)
        assert "multiply" not in shown_steps(app)

        write_preview(tmp_path, preview(calculator_steps(), version=2))
        await until(pilot, lambda: "live preview v2" in header(app))
        await until(pilot, lambda: "multiply" in shown_steps(app))  # once laid out again
        steps = shown_steps(app)
        assert '→ multiply({"a": 51, "b": 44})' in steps
        assert "← 2244" in steps
        assert "Check the product by dividing" in steps  # the reasoning
        assert "turn 2" in header(app) and "4 steps" in header(app)

        await pilot.press("escape")
        assert not isinstance(app.screen, TranscriptScreen)


async def test_the_servers_truncation_is_said(tmp_path: Path) -> None:
    write_preview(tmp_path, preview(calculator_steps(), truncated=True))
    app = transcript_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_on(app, pilot, RUNNING_ROW)
        assert "truncated by the server" in header(app)


async def test_a_running_rollout_without_a_preview_says_so_until_one_comes(
    tmp_path: Path,
) -> None:
    app = transcript_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_on(app, pilot, RUNNING_ROW)
        assert "no live preview yet" in header(app)
        write_preview(tmp_path, preview(calculator_steps()[:2]))
        await until(pilot, lambda: "What is 51 * 44?" in shown_steps(app))
        (tmp_path / rollout_id(RUNNING_ROW) / "preview.json").write_text("{not json")
        await until(pilot, lambda: "preview not read now" in header(app))
        assert "What is 51 * 44?" in shown_steps(app), "the last good preview stays"


async def test_a_preview_folder_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    # A rollout server (or anyone who can write the previews root) links a rollout's folder
    # elsewhere: O_NOFOLLOW on preview.json alone would still read the file it leads to.
    elsewhere, root = tmp_path / "elsewhere", tmp_path / "previews"
    write_preview(elsewhere, preview([{"source": "user", "message": "a file from elsewhere"}]))
    root.mkdir()
    (root / rollout_id(RUNNING_ROW)).symlink_to(elsewhere / rollout_id(RUNNING_ROW))
    app = transcript_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await open_on(app, pilot, RUNNING_ROW)
        await until(pilot, lambda: "a symbolic link: not followed" in header(app))
        assert "a file from elsewhere" not in shown_steps(app)


async def test_a_finished_rollout_shows_its_final_sample(tmp_path: Path) -> None:
    app = transcript_app(tmp_path)  # and no preview: the sample is the transcript
    async with app.run_test(size=SIZE) as pilot:
        await open_on(app, pilot, FINISHED_ROW)
        assert "final sample" in header(app) and "success" in header(app)
        steps = shown_steps(app)
        assert "What is 12 * 3?" in steps and "36" in steps
        assert steps.index("user") < steps.index("assistant")


async def test_the_final_sample_wins_over_the_last_preview(tmp_path: Path) -> None:
    stale = [{"source": "user", "message": "an older preview"}]
    write_preview(tmp_path, preview(stale, status="success", rollout=FINISHED_ROW))
    app = transcript_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_on(app, pilot, FINISHED_ROW)
        assert "final sample" in header(app)
        assert "an older preview" not in shown_steps(app)


async def test_texts_pass_the_dashboards_redaction(tmp_path: Path) -> None:
    steps = [{"source": "user", "message": "my key is hunter2-secret\x1b[31m"}]
    write_preview(tmp_path, preview(steps))
    app = transcript_app(tmp_path)
    app.board.records[rollout_id(RUNNING_ROW)].redact = lambda text: text.replace(
        "hunter2-secret", "***"
    )
    async with app.run_test(size=SIZE) as pilot:
        await open_on(app, pilot, RUNNING_ROW)
        shown = shown_steps(app)
        assert "my key is ***" in shown and "hunter2" not in shown
        assert "\x1b" not in shown


async def test_the_dashboards_keys_wait_behind_the_transcript(tmp_path: Path) -> None:
    app = transcript_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_on(app, pilot, RUNNING_ROW)
        await pilot.press("c")  # cancel, on the dashboard
        assert isinstance(app.screen, TranscriptScreen)
        await pilot.press("t")
        assert not isinstance(app.screen, TranscriptScreen)
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)


async def test_no_transcript_without_a_selected_rollout(tmp_path: Path) -> None:
    app = transcript_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.filter_text = "no such rollout"
        await pilot.pause()
        await pilot.press("t")
        assert not isinstance(app.screen, TranscriptScreen)


async def test_a_live_runs_preview_shows_as_the_server_writes_it(live_eval: LiveFactory) -> None:
    narrating = row(lines=1, ticks=3, tick=0.4, sleep=30)
    async with live_eval([narrating], workflow=Narrating, previews=True) as live:
        app = make_app(live)
        source = live.source
        assert isinstance(source, LiveSource) and source.preview_root is None  # not started
        async with app.run_test(size=SIZE) as pilot:
            await running_rollout(pilot, app)
            assert source.preview_root == live.folder / "previews"
            await pilot.press("t")
            await until(pilot, lambda: "line 1" in shown_steps(app))
            await until(pilot, lambda: "line 4" in shown_steps(app))
            assert "What is 6 * 7?" in shown_steps(app)
            assert "live preview" in header(app) and "running" in header(app)


async def test_the_view_follows_the_latest_step_unless_scrolled_up(tmp_path: Path) -> None:
    def many(count: int, version: int) -> dict[str, Any]:
        steps = [{"source": "user", "message": f"message {n}"} for n in range(count)]
        return preview(steps, version=version)

    write_preview(tmp_path, many(60, 1))
    app = transcript_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_on(app, pilot, RUNNING_ROW)
        view = app.screen.query_one(TranscriptView)
        await until(pilot, lambda: view.max_scroll_y > 0 and view.scroll_y == view.max_scroll_y)

        await pilot.press("home")
        await until(pilot, lambda: view.scroll_y == 0)
        write_preview(tmp_path, many(61, 2))
        await until(pilot, lambda: "message 60" in shown_steps(app))
        await pilot.pause()
        assert view.scroll_y == 0, "reading older steps: the view stays where it is"

        await pilot.press("end")
        write_preview(tmp_path, many(62, 3))
        await until(pilot, lambda: "message 61" in shown_steps(app))
        await until(pilot, lambda: view.scroll_y == view.max_scroll_y)
        bottom = view.max_scroll_y
        write_preview(tmp_path, many(70, 4))
        await until(pilot, lambda: view.max_scroll_y > bottom)
        await until(pilot, lambda: view.scroll_y == view.max_scroll_y)
