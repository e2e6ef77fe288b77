"""The eval end to end: `osmosis-tui eval --headless` against `osmosis eval run` (0.3.8) on the
same official workspace, each tool launching the workspace's real rollout server itself.

The workspace is `tests/conformance/results_workspace` (an official 0.3.8 rollout, in the
`osmosis rollout init` shape: one raw-HTTP chat call per rollout, a grader that checks the
label) with a multiply dataset, `n = 4` attempts per row and `batch_size = 16` in flight. The
model is the stub (`server_stub.llm`, answering at once) in a process of its own, reached by
each tool its own way: ours with `--chat-url`, the official one through LiteLLM with
`OPENAI_API_BASE`. Both run on the conformance venv's interpreter; the rollout's environment
is synced once before the first run, so each tool's own `uv sync` only checks it.

Per run: wall time from the command to its exit, time to the first finished rollout (the
first `[result]` line of its logs.txt), the CPU of its whole process tree (`TreeCpu`, with the
exact total from the kernel's accounting of reaped children beside it), split by process, and
where the seconds went, read from the steps of logs.txt (both tools write the official
format). Runs of the two tools alternate; the median run of each is kept.

`python -m bench.eval_e2e` runs it alone; `make bench` includes it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.procs import ROOT, TreeCpu, started
from bench.table import Figure, ratio

TOOLS = ("ours", "official")
CONFIG = "configs/eval/multiply.toml"
DATASET = "data/multiply.jsonl"
ROLLOUT = "judge"  # the rollout folder of results_workspace
MODEL_KEY = "sk-bench-stub-key"  # LiteLLM refuses to call without one
RUN_TIMEOUT_SEC = 600.0
# Asked as batch_size: the official server advertises a capacity of 4 (its LocalBackend's
# default), and both tools cap at it (EVAL.md §7), so 4 run at once for both.
IN_FLIGHT = 16
ATTEMPTS = 4
_CONFIG_TEXT = f"""# The bench's eval: {ATTEMPTS} attempts per row, {IN_FLIGHT} in flight.
[experiment]
rollout = "{ROLLOUT}"
entrypoint = "main.py"
model_path = "openai/stub-model"
dataset = "multiply"

[evaluation]
n = {ATTEMPTS}
batch_size = {IN_FLIGHT}
pass_threshold = 1.0
agent_workflow_timeout_s = 120
grader_timeout_s = 60

[secrets]
required = []
"""
# Steps of logs.txt, and what the time from one of their lines to the next is spent on.
_STEP_PHASES = {
    "preflight": "preflight",
    "deps": "uv sync",
    "server": "server start",
    "listener": "listeners",
    "schedule": "rollouts",
    "dispatch": "rollouts",
    "result": "rollouts",
}


def make_workspace(target: Path, rows: int) -> Path:
    """The official workspace at `target` with `rows` multiply rows, committed to git (as a
    Platform workspace is), its rollout's environment synced."""
    from tests.conformance.official_eval import WORKSPACE, official_env
    from tests.conformance.official_eval import make_workspace as copy_workspace

    workspace = copy_workspace(target)
    (workspace / CONFIG).write_text(_CONFIG_TEXT)
    pick = random.Random(7)
    with (workspace / DATASET).open("w") as out:
        for _ in range(rows):
            a, b = pick.randint(2, 99), pick.randint(2, 99)
            out.write(
                json.dumps({"user_prompt": f"What is {a} * {b}?", "ground_truth": str(a * b)})
            )
            out.write("\n")
    python = Path(venv_python())
    subprocess.run(
        [str(python.parent / "uv"), "sync", "--project", f"rollouts/{ROLLOUT}"],
        cwd=workspace,
        env=official_env(python),
        capture_output=True,
        check=True,
    )
    assert WORKSPACE.is_dir()
    return workspace


def venv_python() -> str:
    from bench.run import venv_python as find

    return find()


def command(
    tool: str, python: str, model_url: str, output: Path
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one run of `tool` (`ours` or `official`)."""
    from tests.conformance.official_eval import official_env

    common = [CONFIG, "--dataset-file", DATASET, "-o", str(output), "--name", "run", "-y"]
    if tool == "ours":
        argv = [python, "-m", "tui", "eval", *common, "--headless", "--chat-url", model_url]
        # The worktree's code, not the editable install the venv points at.
        env = official_env(Path(python), PYTHONPATH=str(ROOT))
    else:
        argv = [str(Path(python).parent / "osmosis"), "eval", "run", *common]
        env = official_env(Path(python), OPENAI_API_BASE=model_url, OPENAI_API_KEY=MODEL_KEY)
    # As on a user's machine: Python reads the bytecode it compiled (`compiled()`), rather
    # than compiling every module of both tools and of the rollout server at every start.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return argv, env


def compiled(workspace: Path, python: str) -> None:
    """Bytecode for every module either tool's processes import, written once before the
    first run (pip wrote the venv's at install; uv does not by default, and this worktree's
    code has none while PYTHONDONTWRITEBYTECODE is set): no run pays for compiling."""
    venv = workspace / "rollouts" / ROLLOUT / ".venv"
    for tree in (ROOT / "core", ROOT / "tui", ROOT / "server_stub", venv):
        # Not checked: a package may ship a file this Python cannot compile (a template, a
        # module for another version); it is never imported, so nothing waits on it.
        command = [python, "-m", "compileall", "-q", str(tree)]
        subprocess.run(command, check=False, capture_output=True)


def log_lines(path: Path) -> list[tuple[float, str]]:
    """(wall time, step) of every line of a logs.txt in the official format."""
    lines = []
    for line in path.read_text(errors="replace").splitlines():
        stamp, _, rest = line.partition(" ")
        _level, _, rest = rest.partition(" ")
        if not rest.startswith("["):
            continue
        try:
            at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
        lines.append((at, rest[1 : rest.index("]")]))
    return lines


def where_the_time_went(
    lines: list[tuple[float, str]], start: float, end: float
) -> dict[str, float]:
    """Seconds per phase: from the command to the first log line ("start-up"), then each gap
    between two lines charged to the step of the earlier one (a rollout server's own output
    lines to the step they interrupt), then from the last line to the exit ("shutdown")."""
    phases: dict[str, float] = {}
    if not lines:
        return {"start-up": end - start}
    phases["start-up"] = lines[0][0] - start
    current = "run"
    for (at, step), (following, _next_step) in zip(lines, [*lines[1:], (end, "")], strict=True):
        if step != "rollout-server":
            current = _STEP_PHASES.get(step, "other")
        phases[current] = phases.get(current, 0.0) + (following - at)
    last_result = max((at for at, step in lines if step == "result"), default=None)
    if last_result is not None:
        # After the last finished rollout: writing the results and stopping the server.
        tail = end - last_result
        phases["rollouts"] = phases.get("rollouts", 0.0) - tail
        phases["shutdown"] = tail
    return {phase: round(seconds, 3) for phase, seconds in phases.items()}


def run_once(
    tool: str, python: str, workspace: Path, model_url: str, output: Path
) -> dict[str, Any]:
    argv, env = command(tool, python, model_url, output)
    log = output.with_suffix(".out")
    started_wall = time.time()
    t0 = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=workspace, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    with TreeCpu(process.pid) as tree:
        try:
            # Waited for without reaping, so the tree's last reading sees the eval's final CPU.
            os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        finally:
            tree.sample()
    wall = time.monotonic() - t0
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    kernel_total = usage.ru_utime + usage.ru_stime
    folder = output / "run"
    lines = log_lines(folder / "logs.txt") if (folder / "logs.txt").is_file() else []
    results = [at for at, step in lines if step == "result"]
    events = folder / "events.jsonl"
    finished = len(events.read_text().splitlines()) if events.is_file() else 0
    roles = tree.by_role()
    return {
        "tool": tool,
        "exit": process.returncode,
        "finished": finished,
        "wall_s": wall,
        "first_result_s": (min(results) - started_wall) if results else None,
        "cpu_s": max(tree.total, kernel_total),
        "cpu_sampled_s": tree.total,
        "cpu_kernel_s": kernel_total,
        "cpu_by_process_s": {role: round(seconds, 3) for role, seconds in roles.items()},
        "phases_s": where_the_time_went(lines, started_wall, started_wall + wall),
        "output": str(log),
    }


@contextmanager
def stub_model(python: str) -> Iterator[tuple[int, str]]:
    with started([python, "bench/servers.py", "chat"]) as (pid, port):
        yield pid, f"http://127.0.0.1:{port}/v1"


def measure(rows: int, repeats: int) -> dict[str, Any]:
    python = venv_python()
    runs: dict[str, list[dict[str, Any]]] = {tool: [] for tool in TOOLS}
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp, stub_model(python) as (_, model):
        workspace = make_workspace(Path(tmp) / "workspace", rows)
        compiled(workspace, python)
        for repeat in range(repeats):
            order = TOOLS if repeat % 2 == 0 else TOOLS[::-1]
            for tool in order:
                output = Path(tmp) / f"out-{tool}-{repeat}"
                run = run_once(tool, python, workspace, model, output)
                runs[tool].append(run)
                print(
                    f"  {tool:>8}: exit {run['exit']}, {run['finished']} finished, "
                    f"wall {run['wall_s']:.1f} s, first {run['first_result_s'] or 0:.1f} s, "
                    f"CPU {run['cpu_s']:.1f} s {run['cpu_by_process_s']}",
                    flush=True,
                )
                if run["exit"] != 0:
                    print(Path(run["output"]).read_text()[-2000:], file=sys.stderr)
                else:
                    shutil.rmtree(output, ignore_errors=True)
    return {
        "rows": rows,
        "rollouts": rows * ATTEMPTS,
        "in_flight": IN_FLIGHT,
        "runs": runs,
        "median": {tool: _median_run(runs[tool]) for tool in TOOLS},
    }


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(runs, key=lambda run: run["wall_s"])
    median = dict(ordered[len(ordered) // 2])
    median["cpu_s"] = statistics.median(run["cpu_s"] for run in runs)
    firsts = [run["first_result_s"] for run in runs if run["first_result_s"] is not None]
    median["first_result_s"] = statistics.median(firsts) if firsts else None
    return median


def _phases(run: dict[str, Any]) -> str:
    return ", ".join(f"{phase} {seconds:.1f}" for phase, seconds in run["phases_s"].items())


def figures(result: dict[str, Any]) -> list[Figure]:
    ours, official = result["median"]["ours"], result["median"]["official"]
    where = f"eval end to end ({result['rollouts']} rollouts, {result['in_flight']} in flight)"
    wall = ratio(ours["wall_s"], official["wall_s"])
    cpu = ratio(ours["cpu_s"], official["cpu_s"])
    found = [
        Figure(
            f"{where}: wall time",
            f"{ours['wall_s']:.1f} s ({wall:.2f}x)",
            f"{official['wall_s']:.1f} s",
            "<= 0.5x official",
            wall <= 0.5,
        ),
        Figure(
            f"{where}: first finished rollout",
            f"{ours['first_result_s'] or 0:.1f} s",
            f"{official['first_result_s'] or 0:.1f} s",
        ),
        Figure(
            f"{where}: CPU, whole process tree",
            f"{ours['cpu_s']:.1f} s ({cpu:.2f}x)",
            f"{official['cpu_s']:.1f} s",
            "<= 0.5x official",
            cpu <= 0.5,
        ),
    ]
    for tool, run in (("ours", ours), ("official", official)):
        if run["exit"] != 0 or run["finished"] != result["rollouts"]:
            found.append(
                Figure(
                    f"{where}: {tool} exit / finished",
                    f"{run['exit']} / {run['finished']}",
                    "",
                    "0 / all",
                    False,
                )
            )
    return found


def breakdown(result: dict[str, Any]) -> list[str]:
    """Where each tool's seconds went (median run): phases of its wall time, CPU by process."""
    lines = []
    for tool in TOOLS:
        run = result["median"][tool]
        processes = ", ".join(f"{k} {v:.1f}" for k, v in sorted(run["cpu_by_process_s"].items()))
        lines.append(f"{tool:>8} wall: {_phases(run)}")
        lines.append(f"{tool:>8} CPU:  {processes}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    result = measure(args.rows, args.repeats)
    print(json.dumps(result["median"], indent=1))
    from bench.table import format_table

    print(format_table(figures(result)))
    print("\n".join(breakdown(result)))


if __name__ == "__main__":
    main()
