"""Soak: many rollouts at high concurrency with 5 % chat failures, twice (issue 7 §3).

Every rollout is accounted for exactly once in the results, the failures are the chat's
(agent_error) and nothing else, and a second identical batch leaves memory and open sockets
where the first left them. CI: 2 × 300 rollouts at 100 in flight; `make soak`
(OSMOSIS_SOAK=full): 2 × 5,000 at 200 in flight. The figures are printed (pytest -s).

The eval (with its model gateway), the rollout server and the stub model share this process and
its event loop, so the measurements cover all of them. Every 20th row asks the stub model for an
error (the eval's stub is called without retries), so the failures are known in advance.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import resource
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from server_stub.demo import aclose_chat_client
from tests.eval.runs.files import multiply_rows, read_jsonl, write_jsonl
from tests.polling import eventually
from tests.reliability.counts import FULL, scaled
from tests.reliability.in_process import demo_app, rollout_server, run_session

ROLLOUTS = scaled(300, 5000)
IN_FLIGHT = scaled(100, 200)
ERROR_EVERY = 20  # rows: 5 % chat failures
RETENTION_SEC = 0.5
# Allowed growth from the end of the first batch to the end of the second. Live Python objects
# are the precise measure (a batch's board alone holds ~30 objects per rollout); RSS also moves
# with the allocator's arenas, so its bound is looser.
OBJECT_GROWTH_LIMIT = 1000
RSS_GROWTH_LIMIT = 64 * 2**20 if FULL else 32 * 2**20


def rss_bytes() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize()


def open_sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            continue  # closed meanwhile
    return count


def trim_heap() -> None:
    """Hand freed heap pages back to the OS (glibc), so RSS shows what is still in use."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


async def settle(registry: Any) -> tuple[int, int, int]:
    """(RSS, live objects, open sockets) once the server forgot the batch (retention) and
    its connections had time to close.

    The demo workflow's shared chat client keeps up to 64 idle connections to the chat
    endpoint (closed lazily, on its next use); it is closed here, and made again on demand.
    """
    await eventually(lambda: not registry.entries, "retention to empty the registry", timeout=30)
    assert registry.active == 0
    await aclose_chat_client()
    await asyncio.sleep(0.5)
    gc.collect()
    trim_heap()
    return rss_bytes(), len(gc.get_objects()), open_sockets()


@contextlib.contextmanager
def no_log_capture() -> Iterator[None]:
    """pytest keeps every log record captured during a test; thousands of them would count
    as growth. (The run's own logs.txt still gets them.)"""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [h for h in saved if not type(h).__module__.startswith("_pytest")]
    try:
        yield
    finally:
        root.handlers = saved


async def test_soak_every_rollout_once_and_no_growth_after(tmp_path: Path) -> None:
    with no_log_capture():
        await soak(tmp_path)


async def soak(tmp_path: Path) -> None:
    app = demo_app(max_concurrent=IN_FLIGHT, result_retention_sec=RETENTION_SEC)
    registry = app.state.rollout_server.registry
    figures: list[str] = []
    measures: list[tuple[int, int, int]] = []
    rows = [
        {**row, "metadata": {"stub": "error"}} if index % ERROR_EVERY == 0 else row
        for index, row in enumerate(multiply_rows(ROLLOUTS))
    ]
    async with rollout_server(app) as url:
        measures.append(await settle(registry))
        for batch in (1, 2):
            dataset = write_jsonl(tmp_path / f"rows-{batch}.jsonl", rows)
            started = time.monotonic()
            run = await run_session(
                tmp_path,
                dataset,
                servers=(url,),
                chat_url="stub",
                max_in_flight=IN_FLIGHT,
                name=f"soak-{batch}",
            )
            elapsed = time.monotonic() - started
            summary = run.summary
            assert summary.status == "complete", summary.problem
            events = read_jsonl(run.folder / "events.jsonl")
            # Every rollout accounted for exactly once.
            assert len(events) == ROLLOUTS
            assert Counter(e["row_index"] for e in events) == Counter(range(ROLLOUTS))
            assert len({e["rollout_id"] for e in events}) == ROLLOUTS
            outcomes = Counter((e["status"], e.get("error_type")) for e in events)
            assert set(outcomes) <= {("success", None), ("failed", "agent_error")}, outcomes
            failed = outcomes[("failed", "agent_error")]
            assert failed == len(range(0, ROLLOUTS, ERROR_EVERY)), outcomes
            index = read_jsonl(run.folder / "index.jsonl")
            assert len(index) == ROLLOUTS and not [r for r in index if r["status"] == "pending"]
            # One model call per rollout; each injected chat error failed exactly its rollout.
            calls = read_jsonl(run.folder / "calls.jsonl")
            assert Counter(c["rollout_id"] for c in calls) == Counter(
                e["rollout_id"] for e in events
            )
            assert Counter(c["status"] for c in calls) == {200: ROLLOUTS - failed, 502: failed}
            del run, summary
            measures.append(await settle(registry))
            figures.append(
                f"batch {batch}: {ROLLOUTS} rollouts at {IN_FLIGHT} in flight in {elapsed:.1f} s "
                f"({ROLLOUTS / elapsed:.0f}/s), {failed} chat failures"
            )
    (rss0, objects0, sockets0), (rss1, objects1, sockets1), (rss2, objects2, sockets2) = measures
    figures.append(
        f"RSS MiB: before {rss0 / 2**20:.0f}, after batch 1 {rss1 / 2**20:.0f}, "
        f"after batch 2 {rss2 / 2**20:.0f}; live objects: {objects0}, {objects1}, {objects2}; "
        f"open sockets: {sockets0}, {sockets1}, {sockets2}"
    )
    print("\nsoak: " + "\n      ".join(figures))
    assert sockets1 == sockets0 and sockets2 == sockets0, figures  # every connection closed
    assert objects2 - objects1 < OBJECT_GROWTH_LIMIT, figures
    assert rss2 - rss1 < RSS_GROWTH_LIMIT, figures
