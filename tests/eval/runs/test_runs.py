"""`osmosis-tui runs`: the runs under a results root, ours (finished, running) and the official
tool's (a folder in its shape, built here by hand as OFFICIAL_RESULTS_SPEC.md describes it),
as a table and as JSON."""

from __future__ import annotations

import fcntl
import json
import os
import resource
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from core.eval.attach.run_list import describe_run
from core.eval.results.events import journal_line
from tests.eval.results.helpers import item_result, official_inputs
from tests.eval.runs.command import (
    RUN_TIMEOUT_SEC,
    child_env,
    osmosis,
    run_eval,
    run_osmosis,
    start_eval,
)
from tests.eval.runs.files import multiply_rows, write_jsonl
from tests.eval.runs.servers import ServedDemo
from tests.eval.runs.test_interrupt import cancel_on_server
from tests.polling import eventually_sync

EVALS = Path(".osmosis") / "evals"
STARTED = "2026-12-01T08:46:54.142350Z"


def official_run(output: Path, name: str, *, state: str = "finished") -> Path:
    """A run folder as `osmosis eval run` 0.3.8 leaves it (no transitions.jsonl): five work
    items, four graded (three pass), one failed."""
    folder = output / name
    (folder / "rollout_trials").mkdir(parents=True)
    run_id = uuid.uuid4().hex
    manifest = {
        "schema_version": 1,
        "local_run_id": run_id,
        "run_name": name,
        "created_at": "2026-12-01T08:46:54.155727Z",
        "inputs": official_inputs(),
        "provenance": {"sdk_version": "0.3.8"},
    }
    rewards: list[float | None] = [1.0, 1.0, None, 0.25, 1.0]
    results = [
        item_result(
            row,
            rollout_id=uuid.uuid4().hex,
            reward=reward,
            status="success" if reward is not None else "failed",
            error_type=None if reward is not None else "agent_error",
        )
        for row, reward in enumerate(rewards)
    ]
    eval_run: dict[str, Any] = {
        "id": run_id,
        "status": state,
        "name": name,
        "dataset_name": "demo",
        "model_name": "openai/stub-model",
        "rollout_name": "demo",
        "duration_ms": 7970.108212999548 if state == "finished" else 0.0,
        "started_at": STARTED,
    }
    if state == "finished":
        eval_run["completed_at"] = "2026-12-01T08:47:02.112497Z"
    metrics = {
        "eval_run": eval_run,
        "summary": {
            "total_samples": 5,
            "completed_samples": 5,
            "graded": 4,
            "passed": 3,
            "failed": 1,
            "skipped": 0,
            "pass_rate": 0.6,
            "pass_threshold": 1.0,
            "tokens_used": 52,
        },
    }
    progress = {"total_runs": 5, "sampled_rows": 5, "total_dataset_rows": 5}
    for file, document in (
        ("manifest.json", manifest),
        ("metrics.json", metrics),
        ("progress.json", progress),
    ):
        (folder / file).write_text(json.dumps(document, indent=2) + "\n")
    (folder / "events.jsonl").write_bytes(b"".join(map(journal_line, results)))
    return folder


def runs(cwd: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return run_osmosis("runs", *flags, cwd=cwd)


def listed(cwd: Path) -> dict[str, dict[str, Any]]:
    answer = runs(cwd, "--json")
    assert answer.returncode == 0, answer.stderr
    document = json.loads(answer.stdout)
    assert document["root"] == str((cwd / EVALS).absolute())
    return {run["name"]: run for run in document["runs"]}


def test_runs_lists_ours_and_the_official_tools_with_their_status(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    output = tmp_path / EVALS
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(2))
    done = run_eval(
        "--server", demo_server.url, "--dataset-file", str(dataset), "--name", "ours", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    official_run(output, "calm-raven-12")
    # An official run that lives: the official tool holds the name's lock, and has no socket.
    official_run(output, "brave-owl-3", state="running")
    (output / ".locks").mkdir(exist_ok=True)
    lock = os.open(output / ".locks" / "brave-owl-3.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    # An official run killed while it ran: its metrics.json still says running.
    official_run(output, "swift-fox-7", state="running")

    slow = write_jsonl(tmp_path / "slow.jsonl", multiply_rows(1, metadata={"sleep": 30}))
    live = start_eval(
        "--server", demo_server.url, "--dataset-file", str(slow), "--name", "live", cwd=tmp_path
    )
    live_ids: set[str] = set()
    try:
        eventually_sync((output / "live" / "control.sock").exists, "the live run")
        found = listed(tmp_path)
        table = runs(tmp_path)
        live_ids = {
            line["rollout_id"]
            for line in map(json.loads, (output / "live" / "transitions.jsonl").open())
            if "rollout_id" in line
        }
    finally:
        live.send_signal(signal.SIGINT)
        live.finish()
        os.close(lock)
        if live_ids:
            cancel_on_server(demo_server, live_ids)

    assert list(found) == ["brave-owl-3", "calm-raven-12", "live", "ours", "swift-fox-7"]
    ours, official = found["ours"], found["calm-raven-12"]
    assert ours["status"] == "finished" and ours["tool"] == "osmosis-tui"
    assert (ours["done"], ours["total"], ours["pass_rate"]) == (2, 2, 1.0)
    assert not ours["attachable"] and ours["duration_sec"] > 0
    assert official == {
        "name": "calm-raven-12",
        "folder": str(output.absolute() / "calm-raven-12"),
        "status": "finished",
        "attachable": False,
        "tool": "osmosis",
        "done": 5,
        "total": 5,
        "pass_rate": 0.6,
        "started_at": STARTED,
        "duration_sec": 7.970108212999548,
        "problem": None,
    }
    assert found["live"]["status"] == "running" and found["live"]["attachable"]
    assert (found["live"]["done"], found["live"]["total"]) == (0, 1)
    assert found["brave-owl-3"]["status"] == "running"
    assert not found["brave-owl-3"]["attachable"]
    assert found["swift-fox-7"]["status"] == "incomplete"
    assert found["swift-fox-7"]["duration_sec"] is None

    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split() == ["NAME", "STATUS", "DONE", "PASS", "STARTED", "DURATION", "BY"]
    by_name = {line.split()[0]: line.split() for line in lines if line and line[0] != " "}
    assert by_name["calm-raven-12"][1:4] == ["finished", "5/5", "60%"]
    assert by_name["calm-raven-12"][-2:] == ["8.0s", "osmosis"]
    assert by_name["live"][1:3] == ["running", "0/1"]
    assert "osmosis-tui attach NAME" in table.stdout

    # Once the live run is over, it is incomplete (its item was cancelled: pending).
    assert listed(tmp_path)["live"]["status"] == "incomplete"


def test_runs_under_an_empty_or_missing_root(tmp_path: Path) -> None:
    answer = runs(tmp_path, "-o", "nowhere")
    assert (answer.returncode, answer.stdout) == (0, "no runs under nowhere\n")
    answer = runs(tmp_path, "-o", "nowhere", "--json")
    assert json.loads(answer.stdout)["runs"] == []


def test_runs_and_attach_find_the_workspaces_runs_from_any_folder_in_it(tmp_path: Path) -> None:
    # A workspace in the official layout; `eval configs/eval/x.toml` keeps its runs under
    # the workspace root, wherever in it the command runs.
    workspace = tmp_path / "workspace"
    for folder in ("configs/eval", "rollouts/demo/src"):
        (workspace / folder).mkdir(parents=True)
    official_run(workspace / EVALS, "calm-raven-12")
    deep = workspace / "rollouts" / "demo" / "src"

    found = runs(deep, "--json")
    assert found.returncode == 0, found.stderr
    document = json.loads(found.stdout)
    assert document["root"] == str((workspace / EVALS).absolute())
    assert [run["name"] for run in document["runs"]] == ["calm-raven-12"]
    # -o is the workspace's too, as eval takes it with a config.
    assert json.loads(runs(deep, "--json", "-o", str(EVALS)).stdout) == document

    # attach finds the run (and says it is over), rather than no run of the name.
    attached = run_osmosis("attach", "calm-raven-12", cwd=deep)
    assert attached.returncode == 1, attached.stderr
    assert "calm-raven-12" in attached.stderr
    assert "neither a run folder" not in attached.stderr

    # Outside any workspace, the current folder's, as before.
    (tmp_path / "elsewhere").mkdir()
    alone = json.loads(runs(tmp_path / "elsewhere", "--json").stdout)
    assert alone == {"root": str((tmp_path / "elsewhere" / EVALS).absolute()), "runs": []}


def _strict_json(text: str) -> Any:
    """JSON as the standard has it: `Infinity` and `NaN` are no JSON."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is no JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_folders_odd_start_or_duration_is_named_and_the_rest_listed(tmp_path: Path) -> None:
    output = tmp_path / EVALS
    odd: dict[str, tuple[str, str]] = {
        "year-one": ("started_at", '"0001-01-01T00:00:00+05:00"'),
        "year-9999": ("started_at", '"9999-12-31T23:59:59-05:00"'),
        "endless": ("duration_ms", "Infinity"),
        "nan": ("duration_ms", "NaN"),
        "huge": ("duration_ms", "1" + "0" * 400),
        "past-float": ("duration_ms", "1e400"),
        "negative": ("duration_ms", "-5000"),
    }
    for name, (field, value) in odd.items():
        metrics = official_run(output, name) / "metrics.json"
        document = json.loads(metrics.read_text())
        document["eval_run"][field] = "@ODD@"
        metrics.write_text(json.dumps(document).replace('"@ODD@"', value))
    official_run(output, "plain")

    answer = runs(tmp_path, "--json")
    assert answer.returncode == 0, answer.stderr
    found = {run["name"]: run for run in _strict_json(answer.stdout)["runs"]}
    assert sorted(found) == sorted([*odd, "plain"])
    for name, (field, _) in odd.items():
        run = found[name]
        assert run["done"] == 5 and run["status"] == "finished"
        if field == "started_at":
            assert run["started_at"] is None
            assert run["duration_sec"] == 7.970108212999548
            assert "metrics.json: eval_run.started_at is no time that can be read" in run["problem"]
        else:
            assert run["started_at"] == STARTED
            assert run["duration_sec"] is None
            assert "metrics.json: eval_run.duration_ms is no duration" in run["problem"]
    assert found["plain"]["problem"] is None

    table = runs(tmp_path)
    assert table.returncode == 0, table.stderr
    assert "Traceback" not in table.stderr
    rows = {line.split()[0]: line for line in table.stdout.splitlines()[1:] if line}
    for name in odd:
        assert "finished (unreadable parts)" in rows[name]
        assert f"{name}: {EVALS / name / 'metrics.json'}: eval_run." in table.stdout
    assert "-5.0s" not in table.stdout
    assert rows["plain"].split()[1:4] == ["finished", "5/5", "60%"]


# The listing's address space: enough for the interpreter and its imports, far too little for
# a whole read of /dev/zero or of a 1 GiB file (before, a MemoryError traceback).
LISTING_ADDRESS_SPACE = 1 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LISTING_ADDRESS_SPACE, LISTING_ADDRESS_SPACE))


def test_results_files_that_are_no_regular_files_or_huge_are_said_and_not_read(
    tmp_path: Path,
) -> None:
    output = tmp_path / EVALS
    fifo = official_run(output, "fifo-journal") / "events.jsonl"
    fifo.unlink()
    os.mkfifo(fifo)  # a plain open waits for a writer forever
    zero = official_run(output, "zero-journal") / "events.jsonl"
    zero.unlink()
    zero.symlink_to("/dev/zero")
    huge = official_run(output, "huge-journal") / "events.jsonl"
    with huge.open("ab") as journal:  # its five records, then 1 GiB of a line that never ends
        journal.truncate(huge.stat().st_size + (1 << 30))
    manifest = official_run(output, "zero-manifest") / "manifest.json"
    manifest.unlink()
    manifest.symlink_to("/dev/zero")
    metrics = official_run(output, "fifo-metrics") / "metrics.json"
    metrics.unlink()
    os.mkfifo(metrics)
    official_run(output, "plain")

    answer = subprocess.run(
        osmosis("runs", "--json"),
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SEC,  # a guard against the hang, not a measure
        check=False,
        stdin=subprocess.DEVNULL,
        preexec_fn=_limited,
    )
    assert answer.returncode == 0, answer.stderr
    found = {run["name"]: run for run in json.loads(answer.stdout)["runs"]}
    assert sorted(found) == sorted(
        ["fifo-journal", "zero-journal", "huge-journal", "zero-manifest", "fifo-metrics", "plain"]
    )
    assert (
        "events.jsonl cannot be read (a FIFO, not a regular file: not read)"
        in (found["fifo-journal"]["problem"])
    )
    assert (
        "events.jsonl cannot be read (a symbolic link: not followed)"
        in (found["zero-journal"]["problem"])
    )
    assert found["huge-journal"]["done"] == 5
    assert (
        "dropped a torn last line (1073741824 bytes, no newline)"
        in (found["huge-journal"]["problem"])
    )
    assert (
        "manifest.json cannot be read (a symbolic link: not followed)"
        in (found["zero-manifest"]["problem"])
    )
    assert found["zero-manifest"]["total"] is None
    assert (
        "metrics.json cannot be read (a FIFO, not a regular file: not read)"
        in (found["fifo-metrics"]["problem"])
    )
    assert found["plain"]["problem"] is None


def test_a_replayed_folder_whose_manifest_is_dev_zero_is_replayed_with_a_warning(
    tmp_path: Path,
) -> None:
    folder = official_run(tmp_path, "handed-over")
    (folder / "manifest.json").unlink()
    (folder / "manifest.json").symlink_to("/dev/zero")
    (folder / "metrics.json").unlink()
    os.mkfifo(folder / "metrics.json")
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tui.sources.replay import ReplaySource\n"
        "source = ReplaySource(Path(sys.argv[1]))\n"
        "print(source.total_items)\n"
        "print('\\n'.join(source.warnings))\n"
    )
    answer = subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SEC,  # a guard against the hang, not a measure
        check=False,
        stdin=subprocess.DEVNULL,
        preexec_fn=_limited,
    )
    assert answer.returncode == 0, answer.stderr
    total, *warnings = answer.stdout.splitlines()
    assert total == "5", "without a manifest, the items the journal attempted"
    assert f"{folder / 'manifest.json'}: not read (a symbolic link: not followed)" in warnings
    assert f"{folder / 'metrics.json'}: not read (a FIFO, not a regular file: not read)" in (
        warnings
    )


def test_a_finished_run_is_counted_from_its_metrics_while_its_journal_is_unchanged(
    tmp_path: Path,
) -> None:
    """A root of many big runs lists in the time of reading their metrics.json: a finished
    run's summary is what the journal would count, once the journal has not changed since."""
    folder = official_run(tmp_path, "listed")
    journal, metrics = folder / "events.jsonl", folder / "metrics.json"
    document = json.loads(metrics.read_text())
    # A summary that says other numbers than the journal's, to tell which was read.
    document["summary"].update(total_samples=8, completed_samples=8, passed=2)
    metrics.write_text(json.dumps(document))

    def stamp(older: Path, newer: Path) -> None:
        os.utime(older, ns=(1_700_000_000_000_000_000,) * 2)
        os.utime(newer, ns=(1_700_000_001_000_000_000,) * 2)

    stamp(journal, metrics)
    summarized = describe_run(folder)
    assert (summarized.done, summarized.pass_rate, summarized.problem) == (8, 0.25, None)

    stamp(metrics, journal)  # a record appended after metrics.json was written
    counted = describe_run(folder)
    assert (counted.done, counted.pass_rate, counted.problem) == (5, 0.6, None)

    with journal.open("ab") as torn:
        torn.write(b'{"row_index": 9')
    stamp(journal, metrics)  # newer metrics, but a journal that does not end with a record
    repaired = describe_run(folder)
    assert (repaired.done, repaired.pass_rate) == (5, 0.6)
    assert repaired.problem is not None and "dropped a torn last line" in repaired.problem

    journal.unlink()
    journal.symlink_to(folder / "manifest.json")
    stamp(metrics, metrics)
    linked = describe_run(folder)
    assert linked.problem is not None and "a symbolic link: not followed" in linked.problem
