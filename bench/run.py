"""`make bench`: every benchmark side by side in one run, as a table and as JSON.

Servers and clients run in separate processes on the Python 3.12 conformance venv (which
holds both osmosis-ai 0.3.8 and this project), so each pairing runs on the same interpreter
and each side's CPU is measured on its own. Ratios are to the official pair measured in the
same run: these machines are noisy, so absolute figures from another run do not compare.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from typing import Any

from bench.procs import ROOT, cpu_seconds, open_sockets, rss_mb, started

RESULTS = ROOT / "bench" / "results"


def venv_python() -> str:
    """The Python 3.12 venv with both packages; `$BENCH_PYTHON` names one already built (a
    git worktree has no `.conformance/` of its own, and building one needs the network)."""
    explicit = os.environ.get("BENCH_PYTHON")
    if explicit:
        return explicit
    from tests.conformance.venv import ensure_venv

    return str(ensure_venv())


def drive(
    py: str, impl: str, url: str, chat: str, *, n: int, c: int, events_port: int | None = None
) -> dict[str, Any]:
    events = [] if events_port is None else ["--events-port", str(events_port)]
    out = subprocess.run(
        [
            py,
            "-m",
            "bench.drive",
            "--impl",
            impl,
            "--url",
            url,
            "--chat-url",
            chat,
            "-n",
            str(n),
            "-c",
            str(c),
            *events,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def pairing(py: str, client: str, server: str, chat: str, *, n: int, c: int) -> dict[str, Any]:
    with started([py, "bench/servers.py", "rollout", "--impl", server]) as (pid, port):
        url = f"http://127.0.0.1:{port}"
        cpu0 = cpu_seconds(pid)
        result = drive(py, client, url, chat, n=n, c=c)
        server_cpu = cpu_seconds(pid) - cpu0
    # The warm-up rollouts are included in the server's CPU; they are few and the same for all.
    result.update(
        client_impl=client,
        server_impl=server,
        server_cpu_ms_per_rollout=server_cpu / n * 1000,
    )
    return result


def throughput(py: str, chat: str, n: int, repeats: int = 2) -> list[dict[str, Any]]:
    """Every pairing at 32 and at 1 in flight; pairings interleaved, each run `repeats` times
    and the median kept, so that a noisy moment does not land on one pairing only."""
    pairings = (
        ("official", "official"),
        ("ours", "ours"),
        ("ours", "official"),
        ("official", "ours"),
    )
    runs: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for _ in range(repeats):
        for c, count in ((32, n), (1, max(n // 5, 50))):
            for client, server in pairings:
                result = pairing(py, client, server, chat, n=count, c=c)
                runs.setdefault((client, server, c), []).append(result)
                print(
                    f"  {client:>8} client / {server:<8} server  c={c:<3} "
                    f"{result['rollouts_per_s']:7.1f} rollouts/s",
                    flush=True,
                )
    return [
        sorted(results, key=lambda r: r["rollouts_per_s"])[len(results) // 2]
        for results in runs.values()
    ]


def observation(py: str, chat: str) -> list[dict[str, Any]]:
    rows = []
    for c, n in ((1, 200), (500, 2000)):
        rows.append(pairing(py, "ours", "ours", chat, n=n, c=c))
    return rows


def floor(py: str, n: int) -> dict[str, Any]:
    out = subprocess.run(
        [py, "-m", "bench.floor", "-n", str(n), "-c", "32"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def scale(py: str, chat: str) -> dict[str, Any]:
    """1,000 rollouts in flight against one server: errors, memory per rollout, sockets."""
    with started([py, "bench/servers.py", "rollout", "--impl", "ours"]) as (pid, port):
        rss0 = rss_mb(pid)
        result = drive(py, "ours", f"http://127.0.0.1:{port}", chat, n=3000, c=1000)
        result.update(
            server_rss_mb_before=rss0,
            server_rss_mb_after=rss_mb(pid),
            server_open_sockets_after=open_sockets(pid),
        )
    return result


def cli_startup() -> dict[str, Any]:
    samples = []
    for _ in range(5):
        t0 = time.monotonic()
        subprocess.run(
            [str(ROOT / ".venv/bin/osmosis-tui"), "--help"], capture_output=True, check=True
        )
        samples.append(time.monotonic() - t0)
    return {"help_ms_min": min(samples) * 1000, "help_ms_median": sorted(samples)[2] * 1000}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=1000, help="rollouts per throughput pairing")
    args = parser.parse_args()
    py = venv_python()
    report: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": subprocess.run(
                [py, "-V"], capture_output=True, text=True, check=True
            ).stdout.strip(),
        },
    }
    with started([py, "bench/servers.py", "chat"]) as (_chat_pid, chat_port):
        chat = f"http://127.0.0.1:{chat_port}/v1"
        print("throughput (rollouts/s):", flush=True)
        report["throughput"] = throughput(py, chat, args.n)
        print("observation latency ...", flush=True)
        report["observation"] = observation(py, chat)
        print("scale: 1,000 in flight ...", flush=True)
        report["scale"] = scale(py, chat)
    print("floor ...", flush=True)
    report["floor"] = floor(py, 5000)
    report["startup"] = cli_startup()
    from bench.dashboard import dashboard_benchmark
    from bench.gateway import measure as gateway_benchmark

    print("gateway: added latency and CPU per model call ...", flush=True)
    report["gateway"] = gateway_benchmark(py, 2000, repeats=3)

    print("dashboard: 10,000 rollouts, 500 changes/s ...", flush=True)
    report["dashboard"] = dashboard_benchmark()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(report, indent=1))
    print(format_report(report))


def format_report(report: dict[str, Any]) -> str:
    lines = []
    rows = report["throughput"]
    base = {r["in_flight"]: r for r in rows if r["client_impl"] == r["server_impl"] == "official"}
    lines.append(
        f"{'client':>9} {'server':>9} {'c':>4} {'roll/s':>8} {'ratio':>6} {'p50 ms':>7} "
        f"{'p99 ms':>7} {'req/roll':>8} {'cli ms':>7} {'srv ms':>7}"
    )
    for r in rows:
        b = base[r["in_flight"]]
        lines.append(
            f"{r['client_impl']:>9} {r['server_impl']:>9} {r['in_flight']:>4} "
            f"{r['rollouts_per_s']:8.1f} {r['rollouts_per_s'] / b['rollouts_per_s']:6.2f} "
            f"{r['p50_ms']:7.1f} {r['p99_ms']:7.1f} {r['requests_per_rollout']:8.2f} "
            f"{r['client_cpu_ms_per_rollout']:7.2f} {r['server_cpu_ms_per_rollout']:7.2f}"
        )
    for r in report["observation"]:
        lines.append(
            f"observation at {r['in_flight']:>3} in flight: terminal p50 "
            f"{r['observe_terminal_p50_ms']:.1f} ms p99 {r['observe_terminal_p99_ms']:.1f} ms; "
            f"running p50 {r['observe_running_p50_ms'] or 0:.1f} ms p99 "
            f"{r['observe_running_p99_ms'] or 0:.1f} ms ({r['observed_running_share']:.0%} seen)"
        )
    f = report["floor"]
    lines.append(
        f"floor: {f['requests_per_s']:.0f} requests/s on a trivial ASGI app "
        f"(~{f['requests_per_s'] / 2:.0f} rollouts/s at 2 requests per rollout)"
    )
    s = report["scale"]
    lines.append(
        f"scale: 1,000 in flight, {s['failures']} failures, {s['rollouts_per_s']:.0f} rollouts/s, "
        f"server RSS {s['server_rss_mb_before']:.0f} -> {s['server_rss_mb_after']:.0f} MB, "
        f"{s['server_open_sockets_after']} sockets open after"
    )
    st = report["startup"]
    lines.append(f"startup: osmosis-tui --help {st['help_ms_median']:.0f} ms (median of 5)")
    d = report["dashboard"]
    lines.append(
        f"dashboard: {d['rollouts']} rollouts, {d['changes_per_s']} changes/s: "
        f"CPU {d['cpu_share']:.0%} of a core, key-to-repaint p50 {d['key_p50_ms']:.0f} ms "
        f"p99 {d['key_p99_ms']:.0f} ms, RSS {d['rss_mb']:.0f} MB, "
        f"first frame {d['first_frame_ms']:.0f} ms"
    )
    from bench.gateway import figures
    from bench.table import format_table

    lines.append(format_table(figures(report["gateway"])))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
