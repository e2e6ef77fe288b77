"""The theme and the sort, remembered between runs in `$XDG_CONFIG_HOME/osmosis-tui/settings.json`
(every test has a config folder of its own: tests/conftest.py): written atomically, a bad file
ignored with a log line, never a crash."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tui.states import StaticSource, build_app, running_board
from tui.app import create_app
from tui.settings import MAX_SETTINGS_BYTES, Settings, load_settings, save_settings, settings_path
from tui.widgets.table.sorting import Sort

SIZE = (120, 30)
# A read that has not returned by then is waiting for good (a guard, not a performance bound).
HANG_TIMEOUT_SEC = 30.0


def test_the_file_is_in_the_xdg_config_folder_else_in_dot_config(tmp_path: Path) -> None:
    home = Path.home()
    assert settings_path({"XDG_CONFIG_HOME": str(tmp_path)}) == (
        tmp_path / "osmosis-tui" / "settings.json"
    )
    assert settings_path({}) == home / ".config" / "osmosis-tui" / "settings.json"
    # The spec: a relative path is not a config folder.
    assert settings_path({"XDG_CONFIG_HOME": "relative/dir"}).is_relative_to(home / ".config")
    assert settings_path({"XDG_CONFIG_HOME": ""}).is_relative_to(home / ".config")


def test_the_tests_config_folder_is_their_own(config_home: Path) -> None:
    assert settings_path() == config_home / "osmosis-tui" / "settings.json"
    assert not config_home.is_relative_to(Path.home() / ".config")


def test_settings_round_trip_and_are_written_atomically(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "osmosis-tui" / "settings.json"
    assert load_settings(path) == Settings()  # none yet: the defaults, quietly
    save_settings(path, Settings("textual-light", Sort("reward", descending=True)))
    assert load_settings(path) == Settings("textual-light", Sort("reward", descending=True))
    save_settings(path, Settings("nord", Sort()))
    assert load_settings(path) == Settings("nord", Sort())
    assert json.loads(path.read_text()) == {
        "theme": "nord",
        "sort": {"column": None, "descending": False},
    }
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]  # no temporaries


def test_a_replace_that_fails_leaves_the_old_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "settings.json"
    save_settings(path, Settings("nord"))

    def refuse(source: str, target: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with caplog.at_level(logging.WARNING, "tui.settings"):
        save_settings(path, Settings("textual-light"))
    assert load_settings(path) == Settings("nord")
    assert "not saved" in caplog.text and "disk full" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"theme": 7, "sort": {"column": "reward", "descending": true}}', "the theme 7"),
        ('{"theme": "nord", "sort": {"column": "no-such-column"}}', "no such column"),
        ('{"theme": "nord", "sort": "reward"}', "no such column"),
        # Issue 30: values of other types, never a TypeError.
        ('{"theme": "nord", "sort": {"column": ["reward"]}}', "no such column"),
        ('{"theme": "nord", "sort": {"column": {"a": 1}}}', "no such column"),
        ('{"theme": "nord", "sort": {"column": "reward", "descending": []}}', "no such column"),
        ('{"theme": ["nord"], "sort": null}', "not a name"),
    ],
)
def test_a_bad_file_is_ignored_with_a_log_line(
    text: str, said: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING, "tui.settings"):
        settings = load_settings(path)
    assert said in caplog.text and str(path) in caplog.text
    assert settings.sort in (None, Sort("reward", descending=True))


def test_a_file_that_is_not_utf8_or_not_a_file_is_ignored_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    folder = tmp_path / "folder.json"
    folder.mkdir()
    with caplog.at_level(logging.WARNING, "tui.settings"):
        assert load_settings(binary) == Settings()
        assert load_settings(folder) == Settings()
    assert caplog.text.count("cannot be read") == 2


def test_a_file_too_large_or_too_deep_is_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 30: a 100,000-deep array was a `RecursionError` at every dashboard's start."""
    huge = tmp_path / "huge.json"
    huge.write_text("[" * 100_000 + "]" * 100_000)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 30_000 + "]" * 30_000)  # within the size bound
    with caplog.at_level(logging.WARNING, "tui.settings"):
        assert load_settings(huge) == Settings()
        assert load_settings(deep) == Settings()
    assert f"larger than {MAX_SETTINGS_BYTES:,} bytes" in caplog.text
    assert "not JSON (nested too deeply" in caplog.text


def test_a_fifo_in_its_place_is_ignored_without_waiting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 30: opened for reading, a FIFO waits for a writer that never comes, and the
    dashboard never started. Read in a thread, so that the test itself cannot hang."""
    fifo = tmp_path / "settings.json"
    os.mkfifo(fifo)
    loaded: list[Settings] = []
    reader = threading.Thread(target=lambda: loaded.append(load_settings(fifo)), daemon=True)
    with caplog.at_level(logging.WARNING, "tui.settings"):
        reader.start()
        reader.join(timeout=HANG_TIMEOUT_SEC)
    if reader.is_alive():  # let it go: a writer opening the FIFO ends its wait
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
        pytest.fail("reading a FIFO in the settings' place waited for a writer")
    assert loaded == [Settings()]
    assert "cannot be read (not a regular file)" in caplog.text


async def test_the_sort_and_theme_chosen_are_there_the_next_time(config_home: Path) -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("W", "W")  # reward, highest first
        app.theme = "textual-light"  # as the palette's theme picker sets it
        await pilot.pause()
    saved = load_settings(config_home / "osmosis-tui" / "settings.json")
    assert saved == Settings("textual-light", Sort("reward", descending=True))

    again = create_app(StaticSource(running_board(), total=40), start_work=False)
    assert again.theme == "textual-light" and again.sort == Sort("reward", descending=True)
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "reward▼" in again.table.render_line(0).text


@pytest.mark.parametrize(
    ("odd", "said"),
    [
        (
            lambda path: path.write_text('{"theme": "no-such-theme", "sort": {"column": "rew'),
            "not JSON",
        ),
        (lambda path: path.write_text('{"sort": {"column": ["reward"]}}'), "no such column"),
        (lambda path: path.write_text("[" * 100_000 + "]" * 100_000), "larger than"),
    ],
    ids=["corrupt", "a-list-for-a-column", "deep"],
)
async def test_an_odd_file_starts_the_dashboard_with_the_defaults(
    odd: Callable[[Path], object], said: str, config_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = config_home / "osmosis-tui" / "settings.json"
    path.parent.mkdir(parents=True)
    odd(path)
    with caplog.at_level(logging.WARNING, "tui.settings"):
        app = create_app(StaticSource(running_board(), total=40), start_work=False)
    assert said in caplog.text
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.sort == Sort() and app.theme == "textual-dark"


async def test_a_theme_that_is_gone_is_left_out_and_textual_theme_wins(
    config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = config_home / "osmosis-tui" / "settings.json"
    save_settings(path, Settings("no-such-theme", Sort("tokens", descending=True)))
    app = create_app(StaticSource(running_board(), total=40), start_work=False)
    assert app.theme == "textual-dark" and app.sort == Sort("tokens", descending=True)
    save_settings(path, Settings("textual-light"))
    monkeypatch.setenv("TEXTUAL_THEME", "nord")
    app = create_app(StaticSource(running_board(), total=40), start_work=False)
    assert app.theme != "textual-light"
