"""A `--server` run whose server sends no ownership events says so on screen (issue 24), with
the exact settings to start the server with and how to keep them the same across runs; a
server started with them gets no such banner.

Real parts: server_stub served by uvicorn on loopback, the live source, the dashboard under
Pilot. The server's first admission starts the grace its events have (`EVENTS_GRACE_SEC`,
shortened here so that the test does not wait five seconds for nothing).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.eval import EvalRequest, prepare
from core.eval.event_silence import EVENTS_GRACE_SEC
from core.eval.servers.launcher import free_port
from core.serving.loopback import serve_in_loop
from server_stub import LocalBackend, create_rollout_server
from tests.server.plugins import Echo, ExactMatch
from tests.tui.helpers import CHAT_URL, SIZE, LiveFactory, make_app, row, text_of, until
from tui.app import create_app
from tui.sources.live import LiveSource

GRACE_SEC = 0.5


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("core.eval.session.EVENTS_GRACE_SEC", GRACE_SEC)
    monkeypatch.setattr("core.eval.session.EVENTS_CHECK_SEC", 0.1)


async def test_a_server_that_sends_no_events_is_said_on_screen_with_the_settings(
    live_eval: LiveFactory, short_grace: None
) -> None:
    async with live_eval([row(sleep=30), row(sleep=30)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            banner = app.silence_banner
            await until(pilot, lambda: banner.display)
            services = live.source.session._services
            assert services is not None
            endpoint = services.feeds["OSMOSIS_ROLLOUT_OTLP_ENDPOINT"]
            port = endpoint.rsplit(":", 1)[1]
            shown = " ".join(text_of(banner).split())
            assert f"no ownership events from {live.url.removeprefix('http://')}" in shown
            assert f"OSMOSIS_ROLLOUT_OTLP_ENDPOINT={endpoint}" in shown
            assert f"_OSMOSIS_ROLLOUT_PREVIEW_ROOT={live.folder.absolute()}/previews" in shown
            assert f"add --events-port {port} to keep it on every run" in shown
            # Said once in logs.txt too (and the event log), whole.
            await until(
                pilot, lambda: "no ownership events" in (live.folder / "logs.txt").read_text()
            )
            logged = (live.folder / "logs.txt").read_text()
            assert logged.count("no ownership events") == 1
            assert f"--events-port {port}" in logged


async def test_a_server_started_with_the_settings_gets_no_banner(tmp_path: Path) -> None:
    # The whole grace (its exporter batches for a second, and retries while the run's
    # receiver is not up yet): the rollouts outlast it.
    port = free_port()
    server = create_rollout_server(
        backend=LocalBackend(workflow=Echo, grader=ExactMatch),
        configure_logging=False,
        result_wait_timeout_sec=0.3,
        otlp_endpoint=f"http://127.0.0.1:{port}",
    )
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text(
        "".join(json.dumps(row(sleep=EVENTS_GRACE_SEC + 2)) + "\n" for _ in range(2))
    )
    async with serve_in_loop(server) as url:
        plan = prepare(
            EvalRequest(
                servers=(url,),
                dataset_file=dataset,
                output=tmp_path / "out",
                name="heard",
                chat_url=CHAT_URL,
                events_port=port,
            )
        )
        source = LiveSource(plan, rerun=f"osmosis-tui eval --server {url}")
        app = create_app(source, export_dir=tmp_path)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.run_state == "ended", timeout=30)
                assert not app.silence_banner.display
                pool = source.session.pool
                assert pool is not None and pool.slots[0].publishes_events
        finally:
            await source.close()
    assert "no ownership events" not in (tmp_path / "out" / "heard" / "logs.txt").read_text()
