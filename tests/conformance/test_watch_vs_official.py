"""`osmosis-tui watch` against the OFFICIAL osmosis-ai 0.3.8 server, driven by the OFFICIAL
client (issue 27's acceptance): the watch sends nothing, and sees every rollout from the
server's ownership events alone.

The official server runs in the Python 3.12 conformance venv, started with
`OSMOSIS_ROLLOUT_OTLP_ENDPOINT` set to a running watch. That watch listens on 127.0.0.2 (standing
for an address beyond 127.0.0.1) with a bearer, and the server is given it only through the
OpenTelemetry exporter's standard `OTEL_EXPORTER_OTLP_HEADERS`: every event arriving proves
that the official server's exporter sends it. The official client (`official_watch_driver.py`)
admits two quick rollouts and a hung one; the watch's dashboard, under Pilot, shows each with
its phases, flags the hung one stuck, and cancels it with `c` and its confirmation; the
official client sees it end `cancelled`. The watch's folder replays the same.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from core.eval.servers.launcher import free_port
from core.eval.watch import WatchPlan
from core.types import RolloutStatus
from tests.conformance.official_servers import official_server
from tests.conformance.venv import venv_env
from tests.tui.helpers import row_text, until
from tui.app import create_app
from tui.screens.dialogs import ConfirmScreen
from tui.sources.replay import ReplaySource
from tui.sources.watch import WatchSource

pytestmark = pytest.mark.conformance

DRIVER = Path(__file__).with_name("official_watch_driver.py")
TOKEN = "conformance-watch-token-0123456789"
FULL = ["queued", "running", "grading", "success"]
SIZE = (160, 45)
WAIT_SEC = 60.0


def phases(source: WatchSource | ReplaySource, rollout_id: str) -> list[str]:
    record = source.board.records.get(rollout_id)
    return [] if record is None else [mark.status.value for mark in record.timeline()]


async def said(process: asyncio.subprocess.Process) -> dict[str, Any]:
    """The driver's next line, as JSON."""
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), WAIT_SEC)
    assert line, "the official client's driver ended without saying anything"
    message: dict[str, Any] = json.loads(line)
    return message


async def test_a_watch_sees_the_official_servers_rollouts_and_cancels_the_hung_one(
    official_python: Path, tmp_path: Path
) -> None:
    port = free_port()
    endpoint = f"http://127.0.0.2:{port}"
    folder = tmp_path / "watched"
    env = {
        "OSMOSIS_ROLLOUT_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{TOKEN}",
        "OSMOSIS_ROLLOUT_SERVER_ID": "official-a",
        "OSMOSIS_ROLLOUT_NAMESPACE": "team-conformance",
    }
    options = ["--result-wait-timeout-sec", "1.0"]
    async with official_server(official_python, "watched", options, tmp_path, env) as server:
        source = WatchSource(
            WatchPlan(
                events_host="127.0.0.2",
                events_port=port,
                events_token=TOKEN,
                servers=(server.url,),
                stuck_after_sec=2.0,
                output=folder,
            )
        )
        app = create_app(source)
        driver = await asyncio.create_subprocess_exec(
            str(official_python),
            str(DRIVER),
            server.url,
            stdout=asyncio.subprocess.PIPE,
            cwd=tmp_path,
            env=venv_env(),
        )
        try:
            async with app.run_test(size=SIZE) as pilot:
                assert await said(driver) == {"admitted": ["quick-0", "quick-1", "hung"]}
                quick = ("quick-0", "quick-1")
                await until(
                    pilot, lambda: [phases(source, r) for r in quick] == [FULL, FULL], WAIT_SEC
                )
                record = source.board.records["quick-0"]
                assert {mark.source for mark in record.timeline()} == {"server"}
                assert record.reported_by is not None
                assert (record.reported_by.server_id, record.reported_by.run_name) == (
                    "official-a",
                    "official-harness",
                )
                assert record.reported_by.namespace == "team-conformance"
                assert record.latest_result is None  # the events carry no result
                await until(pilot, lambda: "hung" in app.table.order, WAIT_SEC)
                await until(pilot, lambda: "stuck" in row_text(app, "hung"), WAIT_SEC)
                app.table.move_cursor_to("hung")
                await pilot.pause()
                await pilot.press("c")
                assert isinstance(app.screen, ConfirmScreen)
                await pilot.press("y")
                hung = source.board.records["hung"]
                await until(pilot, lambda: hung.status == RolloutStatus.CANCELLED, WAIT_SEC)
                assert [cancel.disposition for cancel in hung.cancels] == ["cancelled_running"]
                assert await said(driver) == {
                    "ended": {"quick-0": "success", "quick-1": "success", "hung": "cancelled"}
                }
                assert source.session.receiver.refused == 0  # every request had the bearer
                shown = {r.rollout_id: phases(source, r.rollout_id) for r in source.board}
        finally:
            if driver.returncode is None:
                driver.kill()
            await driver.wait()
            await source.close()

    replay = ReplaySource(folder)
    replay.to_end()
    assert {r.rollout_id: phases(replay, r.rollout_id) for r in replay.board} == shown
    assert shown["hung"] == ["queued", "running", "cancelled"]
    assert [c.disposition for c in replay.board.records["hung"].cancels] == ["cancelled_running"]
    assert TOKEN not in (folder / "transitions.jsonl").read_text()
