"""Benchmark client: N trivial rollouts with C in flight, through ours or the official client.

Clients (`--impl`): `official` (osmosis-ai 0.3.8's, given an httpx client sized for the
load, as a caller would), `ours` (`RolloutClient(url=...)`, owning its transport) and
`ours-httpx` (ours given the same caller's httpx client as the official one, on httpx's
default transport) and `ours-httpx-core` (ours given a caller's httpx client on
`core.transport`).

Prints one JSON line: rollouts/s, latency percentiles, HTTP requests per rollout (counted by
the server, `bench.servers.RequestCounter`), this process's CPU seconds, and (our client only,
which records observation times) how long after the workflow started/ended the handle saw
`running` / the terminal status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from typing import Any

import httpx

from bench.servers import COUNT_PATH

PROMPT = [{"role": "user", "content": "What is 6 * 7?"}]
CLIENTS = ("official", "ours", "ours-httpx", "ours-httpx-core")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def served_requests(url: str) -> int:
    async with httpx.AsyncClient() as http:
        return int((await http.get(f"{url}{COUNT_PATH}")).text)


async def drive(
    impl: str,
    url: str,
    chat_url: str,
    total: int,
    in_flight: int,
    *,
    events_port: int | None = None,
) -> dict[str, Any]:
    """`events_port` (ours only): the eval's path, an ownership-event receiver on that port
    (the server exports to it) and polls that do not ask for every status."""
    if impl == "official":
        from osmosis_ai.rollout.client import RolloutClient
    else:
        from core.client import RolloutClient
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=in_flight + 8)
    http = None
    if impl == "ours-httpx-core":
        from core.transport import AiohttpTransport

        transport = AiohttpTransport(limits=limits)
        http = httpx.AsyncClient(transport=transport, timeout=60.0, limits=limits)
    elif impl != "ours":
        http = httpx.AsyncClient(timeout=60.0, limits=limits)
    if impl == "official":
        client = RolloutClient(url=url, http_client=http)
    else:  # ours takes the same limits for the connections it makes (unused with `http`)
        client = RolloutClient(url=url, http_client=http, limits=limits)
    extra: dict[str, Any] = {}
    events = 0
    receiver = None
    if events_port is not None:
        from core.eval.events.receiver import EventReceiver

        def heard(_event: object) -> None:
            nonlocal events
            events += 1

        receiver = EventReceiver(heard, port=events_port)
        await receiver.start()
        extra["observe_every_status"] = False
    latencies: list[float] = []
    seen_running: list[float] = []
    seen_terminal: list[float] = []
    failures = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(total):
        queue.put_nowait(index)

    async def worker() -> None:
        nonlocal failures
        while not queue.empty():
            queue.get_nowait()
            started = time.monotonic()
            handle = await client.run_rollout_async(
                PROMPT, chat_url, uuid.uuid4().hex, label="42", **extra
            )
            result = await handle
            latencies.append(time.monotonic() - started)
            if result.status.value != "success":
                failures += 1
                continue
            metrics = result.sample.metrics if result.sample else {}
            for transition in getattr(handle, "transitions", ()):
                if transition.status.value == "running":
                    seen_running.append(transition.at - metrics["started"])
                elif transition.status.value == "success":
                    seen_terminal.append(transition.at - metrics["ended"])

    # Warm up connections and imports so the first rollouts do not skew the figures.
    warm = [client.run_rollout(PROMPT, chat_url, uuid.uuid4().hex, label="42") for _ in range(8)]
    await asyncio.gather(*warm)
    requests = await served_requests(url)
    events = 0
    cpu0, wall0 = time.process_time(), time.monotonic()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
    requests = await served_requests(url) - requests
    if receiver is not None:
        await asyncio.sleep(1.5)  # the exporter's last batch, for the count only
        await receiver.stop()
    await client.aclose()
    if http is not None:
        await http.aclose()
    ms = 1000.0
    return {
        "impl": impl,
        "rollouts": total,
        "in_flight": in_flight,
        "failures": failures,
        "wall_s": wall,
        "rollouts_per_s": total / wall,
        "p50_ms": (percentile(latencies, 0.5) or 0) * ms,
        "p99_ms": (percentile(latencies, 0.99) or 0) * ms,
        "requests_per_rollout": requests / total,
        "events_per_rollout": events / total if receiver is not None else None,
        "client_cpu_s": cpu,
        "client_cpu_ms_per_rollout": cpu / total * ms,
        "observe_running_p50_ms": _ms(percentile(seen_running, 0.5)),
        "observe_running_p99_ms": _ms(percentile(seen_running, 0.99)),
        "observe_terminal_p50_ms": _ms(percentile(seen_terminal, 0.5)),
        "observe_terminal_p99_ms": _ms(percentile(seen_terminal, 0.99)),
        "observed_running_share": len(seen_running) / max(total - failures, 1),
        "mean_latency_ms": statistics.fmean(latencies) * ms if latencies else None,
    }


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", choices=CLIENTS, required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--chat-url", required=True)
    parser.add_argument("-n", type=int, default=500)
    parser.add_argument("-c", type=int, default=32)
    parser.add_argument("--events-port", type=int, help="ours: the eval's path (see drive())")
    args = parser.parse_args()
    result = drive(args.impl, args.url, args.chat_url, args.n, args.c, events_port=args.events_port)
    print(json.dumps(asyncio.run(result)))


if __name__ == "__main__":
    main()
