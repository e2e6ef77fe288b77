"""Our results folder against the official one (EVAL.md §7, §8), file by file and key by key.

On one official-layout workspace (`results_workspace/`: a rollout on the official SDK whose
rows pass, score below the threshold, fail and skip, n = 2), the official `osmosis eval run`
(osmosis-ai 0.3.8, in the conformance venv) makes the run `official`, and `osmosis-tui eval
--server` makes the run `ours` against the same rollout served by hand. Then:

- every file of ours has the keys, key order and value formats of the official one; values
  that must differ (ids, times, durations) are compared by format, so any drift fails here;
- each tool finds nothing to run in the other's complete run, and resumes the other's
  partial run;
- the official upload check (`prepare_eval_upload_plan`) accepts our folder;
- the per-name lock keeps either tool out of a run the other holds;
- the rollout source digest (the lock's code fingerprint) is the official one on a tree with
  every awkward case.
"""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.eval.plan.config import load_config
from core.eval.results.lock import RunLock
from core.eval.results.source_digest import rollout_source_digest
from tests.conformance.official_eval import (
    CONFIG,
    EVALS,
    envelope,
    make_workspace,
    official_env,
    official_rollout_server,
    official_upload_plan,
    run_official_eval,
    run_our_eval,
    stub_model,
)
from tests.eval.runs.command import REPO
from tests.eval.runs.files import read_jsonl

pytestmark = pytest.mark.conformance

HEX32 = re.compile(r"[0-9a-f]{32}")
ISO_MICROS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
LOG_LINE = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z (INFO|WARNING|ERROR|DEBUG|CRITICAL) \[[^\]]+\] .*"
)
ROWS, N = 5, 2
# Keys whose values differ between two runs by nature; compared by format instead.
RUN_SPECIFIC = {"rollout_id", "duration_ms"}
# Ours, beside the official files; the official tools ignore them.
OURS_ONLY = {"transitions.jsonl", "calls.jsonl", "previews"}


@dataclass(frozen=True)
class Runs:
    python: Path
    workspace: Path
    model_url: str
    official: Path
    """A copy of the official run as it finished (later tests run more on the live one)."""
    ours: Path
    """A copy of our run as it finished."""

    def live(self, name: str) -> Path:
        return self.workspace / EVALS / name


@pytest.fixture(scope="module")
def runs(official_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    tmp = tmp_path_factory.mktemp("results-folder")
    workspace = make_workspace(tmp / "ws")
    env = load_config(workspace / CONFIG).env
    with stub_model(tmp / "model.log") as model_url:
        envelope(run_official_eval(official_python, workspace, model_url, "--name", "official"))
        trials = workspace / EVALS / "ours" / "rollout_trials"
        with official_rollout_server(
            official_python, workspace, trials, env, tmp / "server.log"
        ) as url:
            envelope(
                run_our_eval(workspace, "--server", url, "--chat-url", model_url, "--name", "ours")
            )
        copies = tmp / "as-finished"
        for name in ("official", "ours"):
            shutil.copytree(workspace / EVALS / name, copies / name, symlinks=True)
        yield Runs(official_python, workspace, model_url, copies / "official", copies / "ours")


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _by_item(rows: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    return {(row["row_index"], row["run_index"]): row for row in rows}


def _without(document: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key not in keys}


def _check_formats(row: dict[str, Any]) -> None:
    assert HEX32.fullmatch(row["rollout_id"]), row
    assert type(row["duration_ms"]) is float and row["duration_ms"] >= 0, row


# -- the folder --------------------------------------------------------------------------------


def test_our_folder_holds_every_official_file_and_private_files(runs: Runs) -> None:
    official = {path.name for path in runs.official.iterdir()}
    ours = {path.name for path in runs.ours.iterdir()}
    assert ours - OURS_ONLY == official
    for folder in (runs.official, runs.ours):
        for path in folder.rglob("*"):
            if path.is_file() and "rollout_trials" not in path.parts:  # the server's modes
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for name in ("official", "ours"):
        lock = runs.workspace / EVALS / ".locks" / f"{name}.lock"
        assert lock.read_bytes() == b"" and stat.S_IMODE(lock.stat().st_mode) == 0o600


def test_manifest_key_for_key(runs: Runs) -> None:
    official, ours = _json(runs.official / "manifest.json"), _json(runs.ours / "manifest.json")
    assert list(ours) == list(official)
    assert ours["schema_version"] == official["schema_version"] == 1
    assert ours["run_name"] == "ours" and official["run_name"] == "official"
    for manifest in (official, ours):
        assert HEX32.fullmatch(manifest["local_run_id"])
        assert ISO_MICROS.fullmatch(manifest["created_at"])
    # The resume lock: identical, down to the key order and the float forms.
    assert json.dumps(ours["inputs"]) == json.dumps(official["inputs"])
    # Provenance: every official key with the same value, plus ours after them.
    assert list(ours["provenance"])[: len(official["provenance"])] == list(official["provenance"])
    ours_only = ("osmosis_tui_version", "pass_threshold")
    assert _without(ours["provenance"], *ours_only) == official["provenance"]


def test_journal_key_for_key(runs: Runs) -> None:
    official = read_jsonl(runs.official / "events.jsonl")
    ours = read_jsonl(runs.ours / "events.jsonl")
    assert len(ours) == len(official) == ROWS * N
    mine, theirs = _by_item(ours), _by_item(official)
    assert set(mine) == set(theirs)
    for key, record in theirs.items():
        our_record = mine[key]
        assert set(our_record) == set(record), key
        # The same calls to the same stub model: the same token counts too.
        assert _without(our_record, *RUN_SPECIFIC) == _without(record, *RUN_SPECIFIC)
        _check_formats(our_record)
    # Each line is canonical JSON: sorted keys, no spaces.
    for line in (runs.ours / "events.jsonl").read_text().splitlines():
        parsed = json.loads(line)
        assert line == json.dumps(parsed, sort_keys=True, separators=(",", ":"))


def test_index_and_summary_key_for_key(runs: Runs) -> None:
    for folder in (runs.official, runs.ours):
        assert (folder / "summary.jsonl").read_bytes() == (folder / "index.jsonl").read_bytes()
    official = read_jsonl(runs.official / "index.jsonl")
    ours = read_jsonl(runs.ours / "index.jsonl")
    assert [(r["row_index"], r["run_index"]) for r in ours] == [
        (r["row_index"], r["run_index"]) for r in official
    ]
    for our_row, row in zip(ours, official, strict=True):
        assert list(our_row) == list(row)
        assert _without(our_row, *RUN_SPECIFIC) == _without(row, *RUN_SPECIFIC)
        _check_formats(our_row)
    for line in (runs.ours / "index.jsonl").read_text().splitlines():
        assert line == json.dumps(json.loads(line))  # the default separators, as official


def test_progress_byte_for_byte(runs: Runs) -> None:
    official = (runs.official / "progress.json").read_bytes()
    assert (runs.ours / "progress.json").read_bytes() == official
    assert json.loads(official) == {"total_runs": 10, "sampled_rows": 5, "total_dataset_rows": 5}


def test_metrics_key_for_key(runs: Runs) -> None:
    official, ours = _json(runs.official / "metrics.json"), _json(runs.ours / "metrics.json")
    assert list(ours) == list(official) == ["eval_run", "summary"]
    run, their_run = ours["eval_run"], official["eval_run"]
    assert list(run) == list(their_run)
    assert run["id"] == _json(runs.ours / "manifest.json")["local_run_id"]
    assert (run["status"], run["name"]) == ("finished", "ours")
    same = ("status", "dataset_name", "model_name", "rollout_name")
    assert {key: run[key] for key in same} == {key: their_run[key] for key in same}
    assert type(run["duration_ms"]) is float
    assert ISO_MICROS.fullmatch(run["started_at"]) and ISO_MICROS.fullmatch(run["completed_at"])
    assert list(ours["summary"]) == list(official["summary"])
    assert ours["summary"] == official["summary"]
    assert ours["summary"]["tokens_used"] > 0  # counted by the gateway, as by the official bridge


def test_projections_as_official(runs: Runs) -> None:
    def tree(folder: Path) -> list[str]:
        return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())

    for part in ("trajectories", "artifacts"):
        assert tree(runs.ours / part) == tree(runs.official / part)
    index = _by_item(read_jsonl(runs.ours / "index.jsonl"))
    for (row, run), entry in index.items():
        stem = f"row_{row}_run_{run}"
        trial = runs.ours / "rollout_trials" / entry["rollout_id"]
        copy = runs.ours / "trajectories" / f"{stem}.json"
        if "trajectory_filename" in entry:
            assert copy.read_bytes() == (trial / "trajectory.json").read_bytes()
        else:
            assert not copy.exists()
        grade = runs.ours / "artifacts" / stem / "grade.json"
        if grade.exists():
            assert grade.read_bytes() == (trial / "artifacts" / "grade.json").read_bytes()
            their = runs.official / "artifacts" / stem / "grade.json"
            assert grade.read_bytes() == their.read_bytes()  # the same verdict for the same row


def test_logs_in_the_official_line_format(runs: Runs) -> None:
    for folder in (runs.official, runs.ours):
        lines = (folder / "logs.txt").read_text().split("\n")
        assert lines[-1] == ""
        bad = [line for line in lines[:-1] if not LOG_LINE.fullmatch(line)]
        assert bad == [], folder
    ours = (runs.ours / "logs.txt").read_text()
    assert " INFO [run] ours: 10 of 10 work items pending\n" in ours
    assert ours.count(" INFO [result] work item finished {") == ROWS * N


# -- each tool on the other's runs ---------------------------------------------------------------


def test_the_official_upload_accepts_our_folder(runs: Runs) -> None:
    theirs = official_upload_plan(runs.python, runs.official)
    ours = official_upload_plan(runs.python, runs.ours)
    assert ours["local_run_id"] == _json(runs.ours / "manifest.json")["local_run_id"]
    assert ours["schema_versions"] == theirs["schema_versions"]
    assert ours["provenance"] == theirs["provenance"]
    assert list(ours["run"]) == list(theirs["run"])
    assert _without(ours["run"], "name", "started_at", "completed_at") == _without(
        theirs["run"], "name", "started_at", "completed_at"
    )

    def kinds(plan: dict[str, Any]) -> list[str]:
        return sorted(re.sub(r"[0-9a-f]{32}", "<id>", f["path"]) for f in plan["files"])

    assert kinds(ours) == kinds(theirs)


def test_the_official_tool_finds_nothing_to_run_in_our_run(runs: Runs) -> None:
    result = envelope(
        run_official_eval(runs.python, runs.workspace, runs.model_url, "--name", "ours")
    )
    resource = result["resource"]
    assert result["status"] == "success"
    assert (resource["dispatched"], resource["resumed"]) == (0, ROWS * N)
    assert resource["local_run_id"] == _json(runs.ours / "manifest.json")["local_run_id"]
    assert result["message"].startswith("Run 'ours' was already complete; nothing ran")
    assert resource["metrics"] == _json(runs.ours / "metrics.json")["summary"]


def test_we_find_nothing_to_run_in_the_official_run(runs: Runs) -> None:
    folder = runs.live("official")
    result = envelope(
        run_our_eval(runs.workspace, "--server", "http://127.0.0.1:9", "--name", "official")
    )
    assert result["status"] == "success"
    summary = result["osmosis_tui"]  # what only we report, beside the official envelope
    assert summary["status"] == "complete"
    assert summary["items"]["done"] == summary["items"]["resumed"] == ROWS * N
    # Our rewrite of the official snapshots: the official rows, all carried over now.
    assert read_jsonl(folder / "index.jsonl") == [
        {**row, "resumed": True} for row in read_jsonl(runs.official / "index.jsonl")
    ]
    assert (folder / "summary.jsonl").read_bytes() == (folder / "index.jsonl").read_bytes()
    assert (folder / "progress.json").read_bytes() == (runs.official / "progress.json").read_bytes()
    metrics, theirs = _json(folder / "metrics.json"), _json(runs.official / "metrics.json")
    assert metrics["summary"] == theirs["summary"]  # the same numbers from the same journal
    assert _without(metrics["eval_run"], "duration_ms", "started_at", "completed_at") == _without(
        theirs["eval_run"], "duration_ms", "started_at", "completed_at"
    )
    assert (folder / "events.jsonl").read_bytes() == (runs.official / "events.jsonl").read_bytes()
    assert (folder / "manifest.json").read_bytes() == (runs.official / "manifest.json").read_bytes()


def _cut(runs: Runs, source: Path, name: str, keep: int) -> Path:
    """A copy of `source` under the run name `name`, its journal cut to `keep` records."""
    folder = runs.live(name)
    shutil.copytree(source, folder, symlinks=True)
    journal = folder / "events.jsonl"
    journal.write_text("".join(journal.read_text().splitlines(keepends=True)[:keep]))
    return folder


def _completed(folder: Path, kept: list[dict[str, Any]]) -> None:
    events = read_jsonl(folder / "events.jsonl")
    assert events[: len(kept)] == kept
    assert len(events) == ROWS * N
    assert len(_by_item(events)) == ROWS * N
    assert len(read_jsonl(folder / "index.jsonl")) == ROWS * N
    assert _json(folder / "metrics.json")["eval_run"]["status"] == "finished"


def test_the_official_tool_resumes_our_partial_run(runs: Runs) -> None:
    folder = _cut(runs, runs.ours, "ours-partial", keep=7)
    kept = read_jsonl(folder / "events.jsonl")
    result = envelope(
        run_official_eval(runs.python, runs.workspace, runs.model_url, "--name", "ours-partial")
    )
    assert (result["resource"]["dispatched"], result["resource"]["resumed"]) == (3, 7)
    _completed(folder, kept)


def test_we_resume_the_official_partial_run_on_the_launched_workspace(runs: Runs) -> None:
    folder = _cut(runs, runs.official, "official-partial", keep=7)
    kept = read_jsonl(folder / "events.jsonl")
    # Our launcher runs the workspace's rollout with uv on the conformance venv's Python; the
    # rollout's own environment holds osmosis-ai, so nothing of this interpreter's packages may
    # be on its path (the acceptance tests' fixture rollouts need them, this one must not).
    uv = {
        key: official_env(runs.python)[key] for key in ("PATH", "UV_PYTHON", "UV_PYTHON_DOWNLOADS")
    }
    summary = envelope(
        run_our_eval(
            runs.workspace,
            *("--chat-url", runs.model_url, "--name", "official-partial"),
            PYTHONPATH=str(REPO),
            **uv,
        )
    )["osmosis_tui"]
    assert (summary["items"]["resumed"], summary["items"]["done"]) == (7, ROWS * N)
    _completed(folder, kept)
    assert len(list((folder / "trajectories").iterdir())) == len(
        list((runs.official / "trajectories").iterdir())
    )


# -- the lock ----------------------------------------------------------------------------------

_HOLD_OFFICIAL_LOCK = """
import sys
from pathlib import Path
from osmosis_ai.eval.local.state import RunLock
with RunLock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_the_run_lock_is_shared_by_both_tools(runs: Runs) -> None:
    output = runs.workspace / EVALS
    with RunLock.acquire(output, "held"):
        refused = run_official_eval(runs.python, runs.workspace, runs.model_url, "--name", "held")
    assert refused.returncode == 1
    assert "already holds" in refused.stderr and "held.lock" in refused.stderr

    holder = subprocess.Popen(
        [str(runs.python), "-c", _HOLD_OFFICIAL_LOCK, str(output / ".locks" / "also.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=official_env(runs.python),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        ours = run_our_eval(runs.workspace, "--server", "http://127.0.0.1:9", "--name", "also")
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()
    assert ours.returncode == 1, ours.stderr
    assert "'also' is already running" in ours.stderr
    if Path("/proc/locks").exists():  # where the holder can be named
        assert f"(process {holder.pid})" in ours.stderr
    assert not (output / "also").exists()  # refused before anything was written


# -- the rollout source digest ----------------------------------------------------------------

_OFFICIAL_DIGEST = """
import sys
from pathlib import Path
from osmosis_ai.eval.local.runner import compute_source_digest
exclude = Path(sys.argv[2]) if len(sys.argv) > 2 else None
print(compute_source_digest(Path(sys.argv[1]), exclude=exclude))
"""


def test_the_source_digest_is_the_official_one_on_an_awkward_tree(
    official_python: Path, tmp_path: Path
) -> None:
    root = tmp_path / "rollout"
    files = {
        "main.py": "code",
        "a/x": "1",
        "a-b/x": "2",  # component order: a/x before a-b/x
        ".env": "hidden files count",
        "é/ü.py": "non-ASCII names",
        "sub/build": "a file named build is left out",
        "x.egg-info/PKG-INFO": "left out",
        "uv.lock": "left out",
        ".venv/lib/site.py": "left out",
        "node_modules/m.js": "left out",
        "out/run/events.jsonl": "the output root, when inside",
    }
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    (root / "link.py").symlink_to(root / "main.py")

    def official(*args: Path) -> str:
        done = subprocess.run(
            [str(official_python), "-c", _OFFICIAL_DIGEST, *map(str, args)],
            env=official_env(official_python),
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    assert rollout_source_digest(root) == official(root)
    assert rollout_source_digest(root, exclude=root / "out") == official(root, root / "out")
