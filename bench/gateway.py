"""The model gateway's cost per call: the same chat calls sent straight to the upstream and
through `core.eval.gateway`, side by side, at 1 and 64 in flight, streamed and not.

Three processes: the stub chat endpoint with no latency (the upstream), the gateway in front of
it, and the caller (this process). The added latency is the difference of the two callers'
percentiles measured in one run, pairs interleaved; the gateway's CPU per call comes from
/proc. `python -m bench.gateway` runs it alone; `make bench` includes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.drive import percentile
from bench.procs import cpu_seconds, started

BODY = {"model": "osmosis-rollout", "messages": [{"role": "user", "content": "What is 6 * 7?"}]}


async def call_many(
    url: str, key: str, *, total: int, in_flight: int, stream: bool
) -> dict[str, Any]:
    """`total` chat calls with `in_flight` at once; latency of each, whole answer read."""
    latencies: list[float] = []
    failures = 0
    body = {**BODY, "stream": stream}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=in_flight + 8)
    async with httpx.AsyncClient(
        timeout=60.0, limits=limits, headers={"Authorization": f"Bearer {key}"}
    ) as http:
        remaining = iter(range(total))

        async def worker() -> None:
            nonlocal failures
            for _ in remaining:
                t0 = time.monotonic()
                response = await http.post(url, json=body)
                await response.aread()
                latencies.append(time.monotonic() - t0)
                failures += response.status_code != 200

        # Warm-up: every connection opened and every code path run once before timing.
        warm = [http.post(url, json=body) for _ in range(in_flight)]
        for response in await asyncio.gather(*warm):
            await response.aread()
        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        wall = time.monotonic() - t0
    return {
        "calls_per_s": total / wall,
        "p50_ms": (percentile(latencies, 0.5) or 0) * 1000,
        "p99_ms": (percentile(latencies, 0.99) or 0) * 1000,
        "failures": failures,
    }


def serve_gateway(upstream: str, key_file: Path) -> None:
    """The gateway process: prints READY <port> once it listens; its bearer goes to a file."""
    from core.eval.gateway import ModelGateway
    from core.eval.upstreams import OpenAICompatibleUpstream

    async def main() -> None:
        async with (
            OpenAICompatibleUpstream(upstream, model_path="osmosis-stub", max_retries=0) as up,
            ModelGateway(up) as gateway,
        ):
            await asyncio.to_thread(key_file.write_text, gateway.api_key)
            port = int(gateway.base_url.rsplit(":", 1)[1].split("/")[0])
            print(f"READY {port}", flush=True)
            await asyncio.Event().wait()

    asyncio.run(main())


def measure(total: int, repeats: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    py = sys.executable
    with (
        started([py, "bench/servers.py", "chat"]) as (_chat_pid, chat_port),
        tempfile.TemporaryDirectory() as tmp,
    ):
        upstream = f"http://127.0.0.1:{chat_port}/v1"
        key_file = Path(tmp) / "key"
        argv = [py, "-m", "bench.gateway", "--serve", upstream, "--key-file", str(key_file)]
        with started(argv) as (gateway_pid, gateway_port):
            key = key_file.read_text()
            direct_url = f"{upstream}/chat/completions"
            via_url = f"http://127.0.0.1:{gateway_port}/v1/rollouts/bench/chat/completions"
            for stream in (False, True):
                for in_flight in (1, 64):
                    count = total if in_flight > 1 else max(total // 4, 200)
                    runs: dict[str, list[dict[str, Any]]] = {"direct": [], "gateway": []}
                    cpu: list[float] = []
                    for _ in range(repeats):  # interleaved, so noise lands on both
                        runs["direct"].append(
                            asyncio.run(
                                call_many(
                                    direct_url,
                                    "stub",
                                    total=count,
                                    in_flight=in_flight,
                                    stream=False,
                                )
                            )
                        )
                        cpu0 = cpu_seconds(gateway_pid)
                        runs["gateway"].append(
                            asyncio.run(
                                call_many(
                                    via_url, key, total=count, in_flight=in_flight, stream=stream
                                )
                            )
                        )
                        cpu.append((cpu_seconds(gateway_pid) - cpu0) / count * 1000)
                    direct = _median(runs["direct"])
                    via = _median(runs["gateway"])
                    rows.append(
                        {
                            "stream": stream,
                            "in_flight": in_flight,
                            "calls": count,
                            "direct_p50_ms": direct["p50_ms"],
                            "direct_p99_ms": direct["p99_ms"],
                            "gateway_p50_ms": via["p50_ms"],
                            "gateway_p99_ms": via["p99_ms"],
                            "added_p50_ms": via["p50_ms"] - direct["p50_ms"],
                            "added_p99_ms": via["p99_ms"] - direct["p99_ms"],
                            "gateway_cpu_ms_per_call": sorted(cpu)[len(cpu) // 2],
                            "failures": direct["failures"] + via["failures"],
                        }
                    )
    return rows


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return sorted(runs, key=lambda run: run["p50_ms"])[len(runs) // 2]


def format_rows(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'gateway':>9} {'c':>4} {'direct p50':>10} {'p99':>7} {'via p50':>8} {'p99':>7} "
        f"{'added p50':>9} {'p99':>7} {'cpu ms':>7}"
    ]
    for r in rows:
        kind = "stream" if r["stream"] else "plain"
        lines.append(
            f"{kind:>9} {r['in_flight']:>4} {r['direct_p50_ms']:10.2f} {r['direct_p99_ms']:7.2f} "
            f"{r['gateway_p50_ms']:8.2f} {r['gateway_p99_ms']:7.2f} {r['added_p50_ms']:9.2f} "
            f"{r['added_p99_ms']:7.2f} {r['gateway_cpu_ms_per_call']:7.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", metavar="UPSTREAM", help="run the gateway process")
    parser.add_argument("--key-file", type=Path)
    parser.add_argument("-n", type=int, default=2000, help="calls per measurement at 64")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.serve:
        serve_gateway(args.serve, args.key_file)
        return
    rows = measure(args.n, args.repeats)
    print(json.dumps(rows))
    print(format_rows(rows))


if __name__ == "__main__":
    main()
