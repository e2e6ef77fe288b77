"""`make bench`: every benchmark side by side in one run, as one table and as JSON.

Servers and clients run in separate processes on the Python 3.12 conformance venv (which
holds both osmosis-ai 0.3.8 and this project), so each pairing runs on the same interpreter
and each side's CPU is measured on its own. Ratios are to the official figure measured in the
same run: these machines are noisy, so absolute figures from another run do not compare.
Repeated measurements are interleaved (so a noisy moment does not land on one side only) and
their median kept.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.procs import ROOT, cpu_seconds, started
from bench.table import Figure, format_table, ms, ratio

RESULTS = ROOT / "bench" / "results"

# (client, server, with the eval's events): the protocol pairings measured at each level.
PAIRINGS_32 = (
    ("official", "official", False),
    ("ours", "ours", False),
    ("ours", "ours", True),
    ("ours-httpx", "ours", False),
    ("ours-httpx-core", "ours", False),
    ("ours", "official", False),
    ("official", "ours", False),
)
PAIRINGS_1 = (
    ("official", "official", False),
    ("ours", "ours", False),
    ("ours-httpx", "ours", False),
)
CLIENT_NAMES = {
    "official": "official client",
    "ours": "our client owning its transport",
    "ours-httpx": "our client, caller's httpx client (httpx's transport)",
    "ours-httpx-core": "our client, caller's httpx client on core.transport",
}


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
            *(py, "-m", "bench.drive", "--impl", impl, "--url", url, "--chat-url", chat),
            *("-n", str(n), "-c", str(c), *events),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def pairing(
    py: str, client: str, server: str, chat: str, *, n: int, c: int, events: bool = False
) -> dict[str, Any]:
    """One pairing; with `events`, the eval's path: the server exports its ownership events
    to a receiver in the client's process, whose polls do not ask for every status."""
    from core.eval.servers.launcher import free_port

    port = free_port() if events else None
    env = {"OSMOSIS_ROLLOUT_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"} if events else None
    with started([py, "bench/servers.py", "rollout", "--impl", server], env=env) as (pid, sport):
        cpu0 = cpu_seconds(pid)
        result = drive(py, client, f"http://127.0.0.1:{sport}", chat, n=n, c=c, events_port=port)
        server_cpu = cpu_seconds(pid) - cpu0
    # The warm-up rollouts are included in the server's CPU; they are few and the same for all.
    result.update(
        client_impl=client,
        server_impl=server,
        events=events,
        server_cpu_ms_per_rollout=server_cpu / n * 1000,
    )
    result["total_cpu_ms_per_rollout"] = (
        result["client_cpu_ms_per_rollout"] + result["server_cpu_ms_per_rollout"]
    )
    return result


def throughput(py: str, chat: str, n: int, repeats: int = 2) -> list[dict[str, Any]]:
    """Every pairing at 32 and at 1 in flight, each run `repeats` times, interleaved; the
    median run (by rollouts/s) kept."""
    runs: dict[tuple[str, str, bool, int], list[dict[str, Any]]] = {}
    for _ in range(repeats):
        for c, count, pairings in ((32, n, PAIRINGS_32), (1, max(n // 5, 50), PAIRINGS_1)):
            for client, server, events in pairings:
                result = pairing(py, client, server, chat, n=count, c=c, events=events)
                runs.setdefault((client, server, events, c), []).append(result)
                print(
                    f"  {client:>15} client / {server:<8} server{' +events' if events else ''}"
                    f"  c={c:<3} {result['rollouts_per_s']:7.1f} rollouts/s",
                    flush=True,
                )
    return [
        sorted(results, key=lambda r: r["rollouts_per_s"])[len(results) // 2]
        for results in runs.values()
    ]


def observation(py: str, chat: str) -> list[dict[str, Any]]:
    return [pairing(py, "ours", "ours", chat, n=n, c=c) for c, n in ((1, 200), (500, 2000))]


def floor(py: str, n: int) -> dict[str, Any]:
    out = subprocess.run(
        [py, "-m", "bench.floor", "-n", str(n), "-c", "32"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def cli_startup() -> dict[str, Any]:
    samples = []
    for _ in range(5):
        t0 = time.monotonic()
        # The console script of the interpreter running this (make bench: the project's .venv).
        subprocess.run(
            [str(Path(sys.executable).parent / "osmosis-tui"), "--help"],
            capture_output=True,
            check=True,
        )
        samples.append(time.monotonic() - t0)
    return {"help_ms_min": min(samples) * 1000, "help_ms_median": statistics.median(samples) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=1000, help="rollouts per throughput pairing")
    parser.add_argument("--report", action="store_true", help="print the last run's table")
    parser.add_argument("--quick", action="store_true", help="small sizes, one round each")
    args = parser.parse_args()
    if args.report:
        print(format_report(json.loads((RESULTS / "latest.json").read_text())))
        return
    py = venv_python()
    quick = args.quick
    started_at = time.monotonic()
    report: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": subprocess.run(
                [py, "-V"], capture_output=True, text=True, check=True
            ).stdout.strip(),
            "load_before": os.getloadavg(),
        },
    }
    from bench import (
        compare_runs,
        dashboard,
        dashboard_pty,
        eval_e2e,
        gateway,
        memory,
        resume,
        runs_list,
        scale,
    )

    with started([py, "bench/servers.py", "chat"]) as (_chat_pid, chat_port):
        chat = f"http://127.0.0.1:{chat_port}/v1"
        print("protocol pair (rollouts/s):", flush=True)
        report["throughput"] = throughput(py, chat, 200 if quick else args.n, 1 if quick else 2)
        print("observation latency ...", flush=True)
        report["observation"] = observation(py, chat)
    print("floor ...", flush=True)
    report["floor"] = floor(py, 1000 if quick else 5000)
    print("gateway: added latency and CPU per model call ...", flush=True)
    report["gateway"] = gateway.measure(py, 400 if quick else 2000, repeats=1 if quick else 3)
    print("eval end to end ...", flush=True)
    report["eval_e2e"] = eval_e2e.measure(rows=8 if quick else 32, repeats=1 if quick else 3)
    print("dashboard in a pty against headless ...", flush=True)
    report["dashboard_pty"] = dashboard_pty.measure(
        rows=8 if quick else 48, repeats=1 if quick else 3
    )
    print("scale: 2,000 in flight over 4 servers ...", flush=True)
    report["scale"] = scale.measure(
        py, total=600 if quick else 6000, in_flight=300 if quick else 2000
    )
    print("memory per finished item ...", flush=True)
    report["memory"] = memory.measure(py, 3_000 if quick else memory.ITEMS)
    print("memory per finished item, the dashboard open ...", flush=True)
    report["memory_dashboard"] = memory.measure(
        py, 3_000 if quick else memory.ITEMS, dashboard=True
    )
    print("resume: a run killed halfway, resumed, replayed ...", flush=True)
    report["resume"] = resume.measure(py, 3_000 if quick else resume.ITEMS)
    report["startup"] = cli_startup()
    print("compare: two runs of 100,000 work items ...", flush=True)
    report["compare"] = compare_runs.measure(
        items=10_000 if quick else compare_runs.ITEMS, repeats=1 if quick else 5
    )
    print("runs: a root of 200 finished runs ...", flush=True)
    report["runs_list"] = runs_list.measure(
        runs=20 if quick else runs_list.RUNS, repeats=1 if quick else 5
    )
    print("dashboard: 10,000 rollouts, 500 changes/s ...", flush=True)
    report["dashboard"] = dashboard.dashboard_benchmark()
    print("dashboard: 100,000 rollouts, 500 changes/s ...", flush=True)
    report["dashboard_100k"] = dashboard.dashboard_benchmark(20_000 if quick else 100_000)
    report["machine"]["load_after"] = os.getloadavg()
    report["machine"]["minutes"] = (time.monotonic() - started_at) / 60
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(report, indent=1))
    print(format_report(report))


def _pair(
    rows: list[dict[str, Any]], client: str, server: str, c: int, events: bool = False
) -> Any:
    return next(
        r
        for r in rows
        if (r["client_impl"], r["server_impl"], r["in_flight"], r["events"])
        == (client, server, c, events)
    )


def protocol_figures(report: dict[str, Any]) -> list[Figure]:
    rows = report["throughput"]
    base = _pair(rows, "official", "official", 32)
    found = []
    targets = {"ours": ("3x", 3.0), "ours-httpx": ("1.8x", 1.8), "ours-httpx-core": ("1.8x", 1.8)}
    for client in ("ours", "ours-httpx", "ours-httpx-core"):
        r = _pair(rows, client, "ours", 32)
        speed = ratio(r["rollouts_per_s"], base["rollouts_per_s"])
        label, bar = targets[client]
        found.append(
            Figure(
                f"protocol pair, 32 in flight, {CLIENT_NAMES[client]}: rollouts/s",
                f"{r['rollouts_per_s']:.0f} ({speed:.2f}x)",
                f"{base['rollouts_per_s']:.0f}",
                f">= {label} official",
                speed >= bar,
            )
        )
    for client in ("ours", "ours-httpx"):
        r = _pair(rows, client, "ours", 32)
        share = ratio(r["total_cpu_ms_per_rollout"], base["total_cpu_ms_per_rollout"])
        found.append(
            Figure(
                f"protocol pair, 32 in flight, {CLIENT_NAMES[client]}: CPU per rollout "
                "(client + server)",
                f"{ms(r['client_cpu_ms_per_rollout'])} + {ms(r['server_cpu_ms_per_rollout'])} "
                f"({share:.2f}x)",
                f"{ms(base['client_cpu_ms_per_rollout'])} + "
                f"{ms(base['server_cpu_ms_per_rollout'])}",
                "<= 1/3 official" if client == "ours" else "",
                share <= 1 / 3 if client == "ours" else None,
            )
        )
    bare, eval_path = _pair(rows, "ours", "ours", 32), _pair(rows, "ours", "ours", 32, True)
    found.append(
        Figure(
            "protocol pair, 32 in flight: requests per rollout, bare client / eval's path "
            "(server events on, no stale-status poll)",
            f"{bare['requests_per_rollout']:.2f} / {eval_path['requests_per_rollout']:.2f}",
            f"{base['requests_per_rollout']:.2f}",
            "eval's path <= official",
            eval_path["requests_per_rollout"] <= base["requests_per_rollout"] + 0.005,
        )
    )
    found.append(
        Figure(
            "protocol pair, 32 in flight, eval's path: rollouts/s, CPU client + server",
            f"{eval_path['rollouts_per_s']:.0f}, {ms(eval_path['client_cpu_ms_per_rollout'])} + "
            f"{ms(eval_path['server_cpu_ms_per_rollout'])}",
        )
    )
    for client, server in (("ours", "official"), ("official", "ours")):
        r = _pair(rows, client, server, 32)
        found.append(
            Figure(
                f"protocol pair, 32 in flight, {client} client / {server} server: rollouts/s",
                f"{r['rollouts_per_s']:.0f} "
                f"({ratio(r['rollouts_per_s'], base['rollouts_per_s']):.2f}x)",
                f"{base['rollouts_per_s']:.0f}",
            )
        )
    one, base1 = _pair(rows, "ours", "ours", 1), _pair(rows, "official", "official", 1)
    httpx1 = _pair(rows, "ours-httpx", "ours", 1)
    found.append(
        Figure(
            "protocol pair, 1 in flight: latency p50 (ours / ours-httpx)",
            f"{ms(one['p50_ms'])} / {ms(httpx1['p50_ms'])}",
            ms(base1["p50_ms"]),
            "< 10 ms",
            one["p50_ms"] < 10,
        )
    )
    failed = sum(r["failures"] for r in rows)
    found.append(
        Figure("protocol pair: failed rollouts, every pairing", str(failed), "", "0", failed == 0)
    )
    f = report["floor"]
    near = ratio(_pair(rows, "ours", "ours", 32)["rollouts_per_s"], f["requests_per_s"] / 2)
    found.append(
        Figure(
            "floor: trivial ASGI app on the same stack, requests/s (rollouts/s at 2 requests)",
            f"{f['requests_per_s']:.0f} ({f['requests_per_s'] / 2:.0f}); our pair at {near:.0%}",
        )
    )
    for r in report["observation"]:
        found.append(
            Figure(
                f"observation, bare client at {r['in_flight']} in flight: terminal / running p99",
                f"{ms(r['observe_terminal_p99_ms'])} / "
                f"{ms(r['observe_running_p99_ms'] or 0)} ({r['observed_running_share']:.0%} seen)",
            )
        )
    return found


def other_figures(report: dict[str, Any]) -> list[Figure]:
    from bench import dashboard

    st = report["startup"]
    d = report["dashboard"]
    return [
        Figure(
            "startup: osmosis-tui --help (median of 5)",
            ms(st["help_ms_median"]),
            "",
            "< 300 ms",
            st["help_ms_median"] < 300,
        ),
        *dashboard.figures(d),
        # A results file of a run before the 100,000-row dashboard has none.
        *(dashboard.figures(report["dashboard_100k"]) if "dashboard_100k" in report else ()),
    ]


def format_report(report: dict[str, Any]) -> str:
    from bench import (
        compare_runs,
        dashboard_pty,
        eval_e2e,
        gateway,
        memory,
        resume,
        runs_list,
        scale,
    )

    figures = [
        *gateway.figures(report["gateway"]),
        *eval_e2e.figures(report["eval_e2e"]),
        *dashboard_pty.figures(report["dashboard_pty"]),
        *protocol_figures(report),
        *scale.figures(report["scale"]),
        # A results file of a run before the memory benchmark has none.
        *(memory.figures(report["memory"]) if "memory" in report else ()),
        *(memory.figures(report["memory_dashboard"]) if "memory_dashboard" in report else ()),
        *(resume.figures(report["resume"]) if "resume" in report else ()),
        *other_figures(report),
        # A results file of a run before the compare benchmark has none.
        *compare_runs.figures(report.get("compare", [])),
        *(runs_list.figures(report["runs_list"]) if "runs_list" in report else ()),
    ]
    machine = report["machine"]
    head = (
        f"{machine['cpus']} CPUs, {machine['python']}, load average "
        f"{machine['load_before'][0]:.1f} before / {machine['load_after'][0]:.1f} after, "
        f"{machine['minutes']:.0f} min"
    )
    seconds = "\n".join(eval_e2e.breakdown(report["eval_e2e"]))
    return (
        f"{head}\n{format_table(figures)}\n\n"
        f"eval end to end, seconds by phase and CPU seconds by process (median run):\n{seconds}"
    )


if __name__ == "__main__":
    main()
