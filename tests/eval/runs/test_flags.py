"""The flags `osmosis-tui eval` shares with `osmosis eval run` (EVAL.md §1, §2): the workspace
found from its config, `--rows` over `evaluation.limit`, `-o`, the `--json` envelope wherever
`--json` is written, the Platform flags refused, and every bad value an exit 2 naming its flag.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.eval.runs.command import run_eval
from tests.eval.runs.files import envelope, multiply_rows, read_jsonl, run_folder, write_jsonl
from tests.eval.runs.servers import ServedDemo

CONFIG = "configs/eval/multiply.toml"
STUB = ("--chat-url", "stub")

# The keys of `osmosis eval run --json` (osmosis-ai 0.3.8, docs: OFFICIAL_RESULTS_SPEC.md
# §10.2): the envelope, its resource (with a workspace), and one failed row.
OFFICIAL_ENVELOPE_KEYS = ["schema_version", "status", "operation", "resource", "message"]
OFFICIAL_RESOURCE_KEYS = [
    "run_name",
    "local_run_id",
    "output_path",
    "dataset_source",
    "total_work_items",
    "dispatched",
    "succeeded",
    "failed",
    "skipped",
    "resumed",
    "cancelled",
    "duration_ms",
    "metrics",
    "failed_rows",
    "workspace_directory",
]
OFFICIAL_FAILED_ROW_KEYS = [
    "row_index",
    "source_row_index",
    "run_index",
    "rollout_id",
    "error_type",
    "rollout_dir",
]


def test_a_run_started_inside_the_workspace_reads_and_writes_at_its_root(
    workspace: Path, demo_server: ServedDemo
) -> None:
    inside = workspace / "data"
    result = run_eval(
        f"../{CONFIG}",
        *("--server", demo_server.url, *STUB, "-o", "results", "--name", "sub", "--json"),
        cwd=inside,
    )
    assert result.returncode == 0, result.stderr
    # -o is the root's results/, not data/results/; the rows are the root's data/multiply.jsonl.
    folder = workspace / "results" / "sub"
    assert envelope(result.stdout)["resource"]["output_path"] == str(folder.resolve())
    assert len(read_jsonl(folder / "events.jsonl")) == 6
    assert not (inside / "results").exists()
    assert not (inside / ".osmosis").exists()
    # Without -o: <root>/.osmosis/evals/, from any folder of the workspace.
    again = run_eval(
        f"../../{CONFIG}",
        *("--server", demo_server.url, *STUB, "--name", "deep"),
        cwd=workspace / "rollouts" / "multiply",
    )
    assert again.returncode == 0, again.stderr
    assert len(read_jsonl(run_folder(workspace, "deep") / "events.jsonl")) == 6
    assert "Output     │ ../../.osmosis/evals/deep" not in again.stdout  # never a ../ path
    assert f"│ {run_folder(workspace, 'deep').resolve()}" in again.stdout


def test_rows_replace_the_configs_limit(workspace: Path, demo_server: ServedDemo) -> None:
    server = ("--server", demo_server.url, *STUB)
    limited = run_eval(CONFIG, *server, "--name", "limited", "--json", cwd=workspace)
    chosen = run_eval(CONFIG, *server, "--rows", "1,7", "--name", "rows", "--json", cwd=workspace)
    assert limited.returncode == 0, limited.stderr
    assert chosen.returncode == 0, chosen.stderr
    # The config says limit = 6; --rows 1,7 runs rows 1 and 7 (the 8th row), nothing else.
    assert envelope(limited.stdout)["resource"]["total_work_items"] == 6
    assert envelope(chosen.stdout)["resource"]["total_work_items"] == 2
    events = read_jsonl(run_folder(workspace, "rows") / "events.jsonl")
    assert sorted(e["source_row_index"] for e in events) == [1, 7]


def test_rows_keep_the_official_positions_and_record_the_source_rows(tmp_path: Path) -> None:
    result = run_eval("--rows", "2,5", "--name", "picked", "--headless", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    folder = run_folder(tmp_path, "picked")
    # As official (OFFICIAL_RESULTS_SPEC.md §3, §12, §13): row_index is the position among the
    # selected rows, source_row_index the dataset's own row; index.jsonl has positions only.
    events = read_jsonl(folder / "events.jsonl")
    assert sorted((e["row_index"], e["source_row_index"]) for e in events) == [(0, 2), (1, 5)]
    assert sorted(r["row_index"] for r in read_jsonl(folder / "index.jsonl")) == [0, 1]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["inputs"]["dataset"]["selected_source_rows"] == "2,5"
    # transitions.jsonl (ours, what a replay shows) records both, the way the journal does.
    statuses = [t for t in read_jsonl(folder / "transitions.jsonl") if t["kind"] == "status"]
    assert statuses
    assert {(t["row_index"], t["source_row_index"]) for t in statuses} == {(0, 2), (1, 5)}
    # What the run prints names the source rows too.
    finished = [line for line in result.stdout.splitlines() if line.startswith("[")]
    assert sorted(line.split(" source row ")[1].split()[0] for line in finished) == ["2", "5"]


def test_rows_out_of_the_dataset_name_the_flag(workspace: Path, demo_server: ServedDemo) -> None:
    result = run_eval(CONFIG, "--server", demo_server.url, *STUB, "--rows", "8", cwd=workspace)
    assert result.returncode == 2
    assert "--rows: row position 8 out of range: the dataset has 8 rows (valid: 0-7)" in (
        result.stderr
    )


def test_missing_dataset_names_the_path_tried_and_the_flag(
    workspace: Path, demo_server: ServedDemo
) -> None:
    (workspace / "data" / "multiply.jsonl").unlink()
    result = run_eval(CONFIG, "--server", demo_server.url, *STUB, cwd=workspace)
    assert result.returncode == 2
    tried = f"{workspace.resolve()}/data/multiply.{{jsonl,csv,parquet}}"
    assert f"experiment.dataset: no dataset file {tried}" in result.stderr
    assert "--dataset-file PATH" in result.stderr


def test_json_envelope_has_the_official_keys_in_their_order(
    workspace: Path, demo_server: ServedDemo
) -> None:
    rows = [*multiply_rows(2), *multiply_rows(1, metadata={"stub": "error"})]
    dataset = write_jsonl(workspace / "data" / "some.jsonl", rows)
    result = run_eval(
        CONFIG,
        *("--server", demo_server.url, *STUB, "--dataset-file", "data/some.jsonl"),
        *("--n", "2", "--name", "keys", "--json"),
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1, "one line"
    document = envelope(result.stdout)
    # The official keys, in order; what only we report is one key more, after them.
    assert list(document) == [*OFFICIAL_ENVELOPE_KEYS, "osmosis_tui"]
    resource = document["resource"]
    assert list(resource) == OFFICIAL_RESOURCE_KEYS
    assert (document["schema_version"], document["status"]) == (1, "success")
    assert resource["dataset_source"] == "explicit"
    assert (resource["total_work_items"], resource["dispatched"]) == (6, 6)
    assert (resource["succeeded"], resource["failed"], resource["skipped"]) == (4, 2, 0)
    assert (resource["resumed"], resource["cancelled"]) == (0, False)
    assert isinstance(resource["duration_ms"], float)
    metrics = json.loads((run_folder(workspace, "keys") / "metrics.json").read_text())
    assert resource["metrics"] == metrics["summary"]
    failed = resource["failed_rows"]
    assert [list(row) for row in failed] == [OFFICIAL_FAILED_ROW_KEYS] * 2
    assert [(r["source_row_index"], r["run_index"]) for r in failed] == [(2, 0), (2, 1)]
    assert {r["rollout_dir"] for r in failed} == {
        str(run_folder(workspace, "keys").resolve() / "rollout_trials" / r["rollout_id"])
        for r in failed
    }
    assert document["message"] == "Run keys finished: .osmosis/evals/keys"
    assert dataset.is_file()


def test_json_may_come_before_the_subcommand(tmp_path: Path) -> None:
    result = run_eval("--rows", "0,1", "--name", "before", before=("--json",), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = envelope(result.stdout)
    assert document["resource"]["total_work_items"] == 2
    assert document["resource"]["dataset_source"] == "bundled"
    assert "workspace_directory" not in document["resource"], "the demo has no workspace"


def test_verbose_streams_the_log_to_stderr(tmp_path: Path) -> None:
    first = run_eval("--rows", "0,1", "--name", "loud", "--verbose", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    logs = (run_folder(tmp_path, "loud") / "logs.txt").read_text().splitlines()
    assert logs
    assert set(logs) <= set(first.stderr.splitlines())
    assert not set(logs) & set(first.stdout.splitlines()), "stdout keeps the results"
    # A resume streams its own lines, not the first run's again.
    again = run_eval("--rows", "0,1", "--name", "loud", "--verbose", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert not set(logs) & set(again.stderr.splitlines())
    assert (run_folder(tmp_path, "loud") / "logs.txt").read_text().splitlines()[-1] in (
        again.stderr.splitlines()
    )


def test_plain_prints_the_results_without_a_box(tmp_path: Path) -> None:
    rows = "0,10"  # the demo's row 10 fails (its model call errors)
    result = run_eval("--rows", rows, "--name", "plain", "--plain", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert not any(char in result.stdout for char in "╭│╰─")
    assert "work items: 2/2 done · 1 ok · 1 failed" in lines
    assert [line for line in lines if line.startswith("failed: source row 10 run 0: ")]
    assert lines[-2:] == [
        "Run plain finished: .osmosis/evals/plain",
        f"Run the failures again: osmosis-tui eval --rows {rows} --name plain --retry-failed",
    ]


# A workspace entrypoint whose rollouts fail when their row asks (metadata.fail), else the
# fixture's own (rollouts/multiply/main.py).
FAILING_ENTRYPOINT = """\
import main as base


class FailingOnRequest(base.AskTheModel):
    async def run(self, ctx):
        if (ctx.metadata or {}).get("fail"):
            raise RuntimeError("this row asked to fail")
        return await super().run(ctx)


base.AskTheModel = FailingOnRequest
base.main()
"""


def test_end_of_run_shows_failed_source_rows_their_trials_and_what_to_run_next(
    workspace: Path,
) -> None:
    (workspace / "rollouts" / "multiply" / "failing.py").write_text(FAILING_ENTRYPOINT)
    config = workspace / CONFIG
    failing = config.with_name("failing.toml")
    failing.write_text(config.read_text().replace('"main.py"', '"failing.py"'))
    rows = [*multiply_rows(2), *multiply_rows(1, metadata={"fail": True})]
    write_jsonl(workspace / "data" / "three.jsonl", rows)
    result = run_eval(
        "configs/eval/failing.toml",
        *(*STUB, "--dataset-file", "data/three.jsonl", "--rows", "1,2", "--name", "end"),
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    folder = run_folder(workspace, "end")
    (failed,) = [e for e in read_jsonl(folder / "events.jsonl") if e["status"] == "failed"]
    trial = f".osmosis/evals/end/rollout_trials/{failed['rollout_id']}"
    assert (workspace / trial).is_dir()
    lines = result.stdout.splitlines()
    # The failed row by its source row (2, the second selected), with the folder it left.
    assert f"source row 2 run 0: {failed['error_type']} -> {trial}" in lines
    assert "│ Work items │ 2/2 done · 1 ok · 1 failed" in result.stdout
    assert "│ Pass rate  │ 50.0% (1/2 samples, threshold 1)" in result.stdout
    command = (
        "osmosis-tui eval configs/eval/failing.toml --dataset-file data/three.jsonl "
        "--chat-url stub --rows 1,2"
    )
    assert lines[-3:] == [
        "Run end finished: .osmosis/evals/end",
        f"Run the failures again: {command} --name end --retry-failed",
        "Upload with the official CLI: osmosis eval upload end",
    ]


@pytest.mark.parametrize("flags", [("--upload",), ("--tunnel",), ("--tunnel", "cloudflared")])
def test_platform_flags_are_refused_pointing_at_the_upload(
    workspace: Path, flags: tuple[str, ...]
) -> None:
    result = run_eval(CONFIG, *STUB, *flags, cwd=workspace)
    assert result.returncode == 2
    assert f"{flags[0]}: " in result.stderr
    assert "the results folder is upload-compatible" in result.stderr
    assert "osmosis eval upload <folder>" in result.stderr
    assert result.stdout == ""
    assert not (workspace / ".osmosis").exists()


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (("--max-in-flight", "0"), "--max-in-flight"),
        (("--max-in-flight", "many"), "--max-in-flight"),
        (("--rollout-port", "0"), "--rollout-port"),
        (("--rollout-port", "65536"), "--rollout-port"),
        (("--listener-port", "x"), "--listener-port"),
        (("--advertise-url", "ftp://host"), "--advertise-url"),
        (("--rows", "1-x"), "--rows"),
        (("--rows", "5-2"), "--rows"),
        (("--n", "0"), "--n"),
        (("--limit", "-1"), "--limit"),
        (("--agent-timeout", "-3"), "--agent-timeout"),
        (("--pass-threshold", "nan"), "--pass-threshold"),
        (("--name", ".hidden"), "--name"),
        (("--chat-url", "ftp://model"), "--chat-url"),
        (("--on-interrupt", "shrug"), "--on-interrupt"),
        (("--secrets-file", "missing.env"), "--secrets-file"),
        (("--dataset-file", "missing.jsonl"), "missing.jsonl"),
        (("--output",), "--output"),
        (("--json", "--plain"), "--plain"),
        (("--fresh", "--retry-failed"), "--fresh"),
        (("--server", "http://127.0.0.1:9", "--rollout-port", "8123"), "--rollout-port"),
    ],
)
def test_every_bad_flag_value_exits_2_naming_the_flag(
    workspace: Path, flags: tuple[str, ...], named: str
) -> None:
    result = run_eval(CONFIG, *STUB, *flags, cwd=workspace)
    assert result.returncode == 2, result.stderr
    assert named in result.stderr
    assert result.stdout == ""
    assert not (workspace / ".osmosis").exists(), "bad input writes nothing"


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--hedge-after", "0", "more than 0, got '0'"),
        ("--hedge-after", "fastx", "e.g. 3x"),
        ("--requeue-stuck", "0", "must be at least 1, got 0"),
    ],
)
def test_bad_tail_flags_name_the_flag(
    workspace: Path, demo_server: ServedDemo, flag: str, value: str, said: str
) -> None:
    result = run_eval(CONFIG, "--server", demo_server.url, *STUB, flag, value, cwd=workspace)
    assert result.returncode == 2
    assert f"argument {flag}" in result.stderr and said in result.stderr
