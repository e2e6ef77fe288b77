"""The report in a real browser: Debian's Chromium, headless, driven by Playwright. The page
asks for nothing but itself, and its screenshot holds the timeline and the table, drawn.

Not skipped anywhere: CI installs Chromium before the tests (.ci/run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from playwright.sync_api import Browser, FloatRect, sync_playwright

from core.eval.report.page import render_report
from tests.report.png import png_size, read_png
from tui.commands.report import report_of
from tui.sources.replay import ReplaySource

CHROMIUM = Path("/usr/bin/chromium")
#: Chromium kept from reaching anything of its own accord (updates, sync, field trials), so
#: that every request the page records is the page's.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: The page's colours (page.STYLE) the test looks for: the band of rollouts in flight and a
#: finished rollout's success on the rail, as RGB.
IN_FLIGHT = (0x9E, 0xC5, 0xFE)
SUCCESS = (0x1A, 0x7F, 0x37)
WHITE = (255, 255, 255)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM.is_file(), f"{CHROMIUM} is missing: apt-get install chromium"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield launched
        launched.close()


def test_the_report_opens_offline_with_its_timeline_and_table(
    browser: Browser, demo_folder: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.html"
    report.write_text(render_report(report_of(ReplaySource(demo_folder))), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(report.as_uri(), wait_until="load")
    shot = page.screenshot(full_page=True)
    assert requested == [report.as_uri()]

    width, height = png_size(shot)
    timeline = page.locator("#timeline svg").bounding_box()
    table = page.locator("table#rows").bounding_box()
    assert timeline is not None and table is not None
    for box in (timeline, table):
        assert box["width"] > 600 and box["height"] > 100
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
        assert box["y"] >= 0 and box["y"] + box["height"] <= height
    assert timeline["y"] + timeline["height"] <= table["y"]  # the timeline comes first

    pixels = read_png(shot)[..., :3]
    drawn = _inside(pixels, timeline)
    not_white = np.any(drawn != WHITE, axis=-1).mean()
    assert not_white > 0.2  # the plots' own background, at the least
    assert _holds(drawn, IN_FLIGHT) and _holds(drawn, SUCCESS)
    rows = _inside(pixels, table)
    assert np.any(rows != WHITE, axis=-1).mean() > 0.02  # its text


def _inside(pixels: NDArray[np.uint8], box: FloatRect) -> NDArray[np.int64]:
    top, left = round(box["y"]), round(box["x"])
    bottom, right = top + round(box["height"]), left + round(box["width"])
    return pixels[top:bottom, left:right].astype(np.int64)


def _holds(pixels: NDArray[np.int64], colour: tuple[int, int, int]) -> bool:
    """Whether some pixel has `colour`, give or take a little (the renderer's rounding)."""
    return bool(np.any(np.abs(pixels - np.array(colour)).max(axis=-1) <= 6))
