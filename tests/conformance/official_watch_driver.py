"""Send rollouts to a rollout server with the OFFICIAL osmosis-ai 0.3.8 client, as a trainer or a
custom harness would, for `osmosis-tui watch` to see (tests/conformance/test_watch_vs_official.py).

Runs inside the Python 3.12 conformance venv (see venv.py), as a subprocess of the test:

    python official_watch_driver.py URL

It admits `quick-0` and `quick-1` (answered at once) and `hung` (a workflow that sleeps 300 s),
each tagged with a run (`metadata.osmosis_observability`), prints `{"admitted": [...]}`, then
waits for every one to end, however it ends (the test cancels `hung` from the watch), and
prints `{"ended": {rollout_id: status}}`. This module imports only the official package,
never this project's code.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from osmosis_ai.rollout.client import RolloutClient

# Handed to the server as the rollouts' chat endpoint; the test workflow never calls it.
CHAT_URL = "http://127.0.0.1:9/v1"
RUN = {"run_id": "official-run-1", "run_name": "official-harness"}
SLEEPS = {"quick-0": 0.0, "quick-1": 0.0, "hung": 300.0}
WAIT_SEC = 120.0


def say(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


async def main(url: str) -> None:
    client = RolloutClient(url=url)
    handles = {}
    for rollout_id, sleep in SLEEPS.items():
        handles[rollout_id] = await client.run_rollout_async(
            initial_messages=[{"role": "user", "content": "6*7?"}],
            chat_completions_url=CHAT_URL,
            rollout_id=rollout_id,
            label="42",
            metadata={"sleep": sleep, "osmosis_observability": RUN},
        )
    say({"admitted": list(handles)})
    ended = {}
    for rollout_id, handle in handles.items():
        result = await asyncio.wait_for(handle.wait_for_completion(), WAIT_SEC)
        ended[rollout_id] = str(getattr(result.status, "value", result.status))
    say({"ended": ended})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
