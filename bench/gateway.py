"""The model gateway's cost per call: the same chat calls sent straight to the upstream,
through `core.eval.gateway.model_gateway`, and through the official osmosis-ai 0.3.8 LiteLLM
bridge driven at the same upstream, side by side, at 1 and 64 calls in flight, streamed and not.

One process each: the upstream (the stub chat endpoint), our gateway, the official bridge
(`LiteLLMBridge` behind `LlmBridgeListener`, as `osmosis eval run` serves it, pointed at the
upstream with `api_base`), and the caller (this process, on aiohttp so that its own cost stays
small). The upstream answers at once for the 1-in-flight figures (the added latency is then
all overhead) and after `LOADED_LATENCY_SEC` for the 64-in-flight ones, so that 64 calls in
flight is an offered load the machine can carry rather than a queue that measures the
caller. The added latency is a percentile through a gateway minus the same percentile of
the direct calls measured in the same round; the rounds interleave the three paths and the
median round is kept. CPU per call is the gateway process's own CPU (from /proc) over the
calls of the round.

`python -m bench.gateway` runs it alone (in the conformance venv, which holds both); `make
bench` includes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import aiohttp

from bench.drive import percentile
from bench.procs import cpu_seconds, started
from bench.table import Figure, format_table, ms, ratio

BODY = {"model": "osmosis-rollout", "messages": [{"role": "user", "content": "What is 6 * 7?"}]}
#: The upstream's wait per call at 64 in flight: 64 / 0.2 s = 320 calls/s offered.
LOADED_LATENCY_SEC = 0.2
PATHS = ("direct", "ours", "official")
OFFICIAL_TOKEN = "bench-bridge-token"
# LiteLLM refuses to call an OpenAI-compatible server without some key.
UPSTREAM_KEY = "sk-bench-stub"
# Importing LiteLLM fetches its price map from the internet unless told to use its own copy.
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


async def call_many(
    url: str, key: str, *, total: int, in_flight: int, stream: bool
) -> dict[str, Any]:
    """`total` chat calls with `in_flight` at once; each timed until its body is read."""
    latencies: list[float] = []
    failures = 0
    body = {**BODY, "stream": stream}
    expected = b"data: [DONE]" if stream else b'"choices"'
    headers = {"Authorization": f"Bearer {key}"}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as http:

        async def one() -> None:
            nonlocal failures
            t0 = time.monotonic()
            async with http.post(url, json=body) as response:
                content = await response.read()
            latencies.append(time.monotonic() - t0)
            failures += response.status != 200 or expected not in content

        # Warm-up: every connection opened and every code path run once before timing.
        await asyncio.gather(*(one() for _ in range(in_flight)))
        latencies.clear()
        failures = 0
        remaining = iter(range(total))

        async def worker() -> None:
            for _ in remaining:
                await one()

        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        wall = time.monotonic() - t0
    return {
        "calls_per_s": total / wall,
        "p50_ms": (percentile(latencies, 0.5) or 0) * 1000,
        "p99_ms": (percentile(latencies, 0.99) or 0) * 1000,
        "failures": failures,
    }


def _ready(port: int) -> None:
    print(f"READY {port}", flush=True)


def serve_ours(upstream: str, key_file: Path) -> None:
    """Our gateway in front of `upstream`, as the eval runs it; its bearer goes to a file."""
    from core.eval.gateway.model_gateway import ModelGateway
    from core.eval.gateway.upstreams import OpenAICompatibleUpstream

    async def main() -> None:
        async with (
            OpenAICompatibleUpstream(upstream, model_path="openai/osmosis-stub") as up,
            ModelGateway(up) as gateway,
        ):
            await asyncio.to_thread(key_file.write_text, gateway.api_key)
            _ready(int(gateway.base_url.rsplit(":", 1)[1]))
            await asyncio.Event().wait()

    asyncio.run(main())


def serve_official(upstream: str) -> None:
    """The official bridge in front of `upstream`, as `osmosis eval run` serves it (the
    conformance venv only): LiteLLM calls an OpenAI-compatible server at `api_base`."""
    from osmosis_ai.eval.local import LiteLLMBridge, LlmBridgeListener

    async def main() -> None:
        bridge = LiteLLMBridge(model="openai/osmosis-stub", api_key=UPSTREAM_KEY, api_base=upstream)
        async with LlmBridgeListener(bridge, auth_token=OFFICIAL_TOKEN) as listener:
            _ready(int(listener.base_url.rsplit(":", 1)[1]))
            await asyncio.Event().wait()

    asyncio.run(main())


@contextmanager
def _gateways(py: str, upstream: str) -> Iterator[dict[str, tuple[str, str, int | None]]]:
    """Both gateways in front of `upstream`: path -> (chat URL, bearer, pid)."""
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        key_file = tmp / "key"
        ours_argv = [py, "-m", "bench.gateway", "--serve", upstream, "--key-file", str(key_file)]
        ours_pid, ours_port = stack.enter_context(started(ours_argv))
        official_argv = [py, "-m", "bench.gateway", "--serve-official", upstream]
        official_pid, official_port = stack.enter_context(started(official_argv, env=OFFLINE))
        route = "/v1/rollouts/bench/chat/completions"
        yield {
            "direct": (f"{upstream}/chat/completions", UPSTREAM_KEY, None),
            "ours": (f"http://127.0.0.1:{ours_port}{route}", key_file.read_text(), ours_pid),
            "official": (f"http://127.0.0.1:{official_port}{route}", OFFICIAL_TOKEN, official_pid),
        }


def measure(
    py: str, total: int, repeats: int, *, levels: tuple[int, ...] = (1, 64)
) -> list[dict[str, Any]]:
    """Every path at 1 and 64 in flight, plain and streamed; one row per (stream, in flight)."""
    rows: list[dict[str, Any]] = []
    for in_flight in levels:
        latency = 0.0 if in_flight == 1 else LOADED_LATENCY_SEC
        count = total if in_flight > 1 else max(total // 4, 200)
        chat = [py, "bench/servers.py", "chat", "--latency", str(latency)]
        with (
            started(chat) as (_chat_pid, chat_port),
            _gateways(py, f"http://127.0.0.1:{chat_port}/v1") as paths,
        ):
            for stream in (False, True):
                rounds: list[dict[str, dict[str, Any]]] = []
                for repeat in range(repeats):
                    # Rotated each round, so that no path always runs first after a pause.
                    order = PATHS[repeat % 3 :] + PATHS[: repeat % 3]
                    result: dict[str, dict[str, Any]] = {}
                    for path in order:
                        url, key, pid = paths[path]
                        cpu0 = cpu_seconds(pid) if pid else 0.0
                        run = asyncio.run(
                            call_many(
                                url,
                                key,
                                total=count,
                                in_flight=in_flight,
                                # The upstream is always called plainly: the gateways never
                                # stream upstream, so the direct path is the same call.
                                stream=stream and path != "direct",
                            )
                        )
                        run["cpu_ms_per_call"] = (
                            (cpu_seconds(pid) - cpu0) / count * 1000 if pid else 0.0
                        )
                        result[path] = run
                    rounds.append(result)
                rows.append(_row(rounds, stream=stream, in_flight=in_flight, calls=count))
                print(f"  {_line(rows[-1])}", flush=True)
    return rows


def _row(
    rounds: list[dict[str, dict[str, Any]]], *, stream: bool, in_flight: int, calls: int
) -> dict[str, Any]:
    row: dict[str, Any] = {"stream": stream, "in_flight": in_flight, "calls": calls}
    for path in ("ours", "official"):
        for q in ("p50", "p99"):
            row[f"{path}_added_{q}_ms"] = statistics.median(
                run[path][f"{q}_ms"] - run["direct"][f"{q}_ms"] for run in rounds
            )
        row[f"{path}_cpu_ms_per_call"] = statistics.median(
            run[path]["cpu_ms_per_call"] for run in rounds
        )
    for path in PATHS:
        row[f"{path}_p50_ms"] = statistics.median(run[path]["p50_ms"] for run in rounds)
        row[f"{path}_p99_ms"] = statistics.median(run[path]["p99_ms"] for run in rounds)
    row["failures"] = sum(run[path]["failures"] for run in rounds for path in PATHS)
    return row


def _line(r: dict[str, Any]) -> str:
    kind = "stream" if r["stream"] else "plain"
    return (
        f"{kind:>6} c={r['in_flight']:<3} direct p50 {r['direct_p50_ms']:7.2f} ms | "
        f"added p50/p99 ours {r['ours_added_p50_ms']:6.2f}/{r['ours_added_p99_ms']:6.2f} "
        f"official {r['official_added_p50_ms']:6.2f}/{r['official_added_p99_ms']:6.2f} ms | "
        f"cpu/call ours {r['ours_cpu_ms_per_call']:.2f} official "
        f"{r['official_cpu_ms_per_call']:.2f} ms | failures {r['failures']}"
    )


def figures(rows: list[dict[str, Any]]) -> list[Figure]:
    found: list[Figure] = []
    for r in rows:
        where = f"gateway, {'streamed' if r['stream'] else 'plain'}, {r['in_flight']} in flight"
        loaded = r["in_flight"] > 1
        found.append(
            Figure(
                f"{where}: added latency p50 / p99",
                f"{ms(r['ours_added_p50_ms'])} / {ms(r['ours_added_p99_ms'])}",
                f"{ms(r['official_added_p50_ms'])} / {ms(r['official_added_p99_ms'])}",
                "p50 < 1 ms" if loaded else "",
                r["ours_added_p50_ms"] < 1.0 if loaded else None,
            )
        )
        share = ratio(r["ours_cpu_ms_per_call"], r["official_cpu_ms_per_call"])
        found.append(
            Figure(
                f"{where}: gateway CPU per call",
                f"{ms(r['ours_cpu_ms_per_call'])} ({share:.2f}x)",
                ms(r["official_cpu_ms_per_call"]),
                "<= 1/3 official",
                share <= 1 / 3,
            )
        )
        if r["failures"]:
            found.append(Figure(f"{where}: failed calls", str(r["failures"]), "", "0", False))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", metavar="UPSTREAM", help="run our gateway")
    parser.add_argument("--serve-official", metavar="UPSTREAM", help="run the official bridge")
    parser.add_argument("--key-file", type=Path)
    parser.add_argument("-n", type=int, default=2000, help="calls per measurement at 64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1, 64])
    args = parser.parse_args()
    if args.serve:
        serve_ours(args.serve, args.key_file)
        return
    if args.serve_official:
        serve_official(args.serve_official)
        return
    python = os.environ.get("BENCH_PYTHON", sys.executable)
    rows = measure(python, args.n, args.repeats, levels=tuple(args.in_flight))
    print(json.dumps(rows))
    print(format_table(figures(rows)))


if __name__ == "__main__":
    main()
