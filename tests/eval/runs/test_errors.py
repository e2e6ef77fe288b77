"""Every way an eval can go wrong, through the command: bad input exits 2 naming the file, line
and key or flag; servers that cannot be reached or die exit 1 and keep what finished."""

from __future__ import annotations

import json
import os
import signal
import socket
from collections import Counter
from pathlib import Path

import pytest

from core.eval.results.lock import RunLock
from tests.eval.runs.command import run_eval, start_eval
from tests.eval.runs.files import multiply_rows, pending_items, read_jsonl, run_folder, write_jsonl
from tests.eval.runs.servers import ServedDemo, served_demo
from tests.polling import eventually_sync

EXPERIMENT = """\
[experiment]
rollout = "multiply"
entrypoint = "main.py"
model_path = "openai/gpt-5-mini"
dataset = "multiply"
"""


def workspace_with(tmp_path: Path, config: str, rows: str | None = None) -> Path:
    """A workspace whose configs/eval.toml is `config` (and data/multiply.jsonl is `rows`)."""
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "eval.toml").write_text(config)
    entrypoint = tmp_path / "rollouts" / "multiply" / "main.py"
    entrypoint.parent.mkdir(parents=True)
    entrypoint.write_text("raise SystemExit('never started by these tests')\n")
    (entrypoint.parent / "pyproject.toml").write_text('[project]\nname = "multiply"\n')
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "multiply.jsonl").write_text(
        rows if rows is not None else json.dumps(multiply_rows(1)[0]) + "\n"
    )
    return tmp_path


GOOD_ROW = json.dumps(multiply_rows(1)[0])
# Readable, but past the nesting limit (core/eval/untrusted_json.py): no request could carry it.
DEEP_METADATA = '{"metadata": ' + '{"a": ' * 300 + "1" + "}" * 300 + "}"


@pytest.mark.parametrize(
    ("config", "rows", "args", "expected"),
    [
        pytest.param(
            EXPERIMENT + "[evaluation\nlimit = 2\n",
            None,
            (),
            ["configs/eval.toml:6: invalid TOML"],
            id="bad-toml",
        ),
        pytest.param(
            EXPERIMENT + "[evaluation]\nlimt = 2\n[extra]\n",
            None,
            (),
            [
                "configs/eval.toml:7: evaluation.limt: unknown key",
                "configs/eval.toml:8: extra: unknown section",
            ],
            id="unknown-keys-together",
        ),
        pytest.param(
            EXPERIMENT.replace('entrypoint = "main.py"\n', ""),
            None,
            (),
            ["configs/eval.toml:1: experiment.entrypoint: missing required key"],
            id="missing-key",
        ),
        pytest.param(
            EXPERIMENT,
            GOOD_ROW + '\n{"ground_truth": "12"}\n',
            (),
            ["data/multiply.jsonl:2: user_prompt: missing"],
            id="missing-column",
        ),
        pytest.param(
            EXPERIMENT,
            GOOD_ROW + '\n{"user_prompt": "What is\n',
            (),
            ["data/multiply.jsonl:2: invalid JSON"],
            id="bad-row",
        ),
        pytest.param(
            EXPERIMENT,
            GOOD_ROW + "\n" + DEEP_METADATA + "\n",
            (),
            ["data/multiply.jsonl:2: metadata: nested too deeply (more than 128 levels"],
            id="deep-metadata",
        ),
        pytest.param(
            EXPERIMENT,
            GOOD_ROW + "\n" + "[" * 100_000 + "\n",
            (),
            ["data/multiply.jsonl:2: invalid JSON: nested too deeply (more than 128 levels"],
            id="json-too-deep-to-parse",
        ),
        pytest.param(
            EXPERIMENT + "[advanced]\nx = " + "[" * 100_000 + "]" * 100_000 + "\n",
            None,
            (),
            ["configs/eval.toml: invalid TOML: nested too deeply (more than 128 levels"],
            id="toml-too-deep-to-parse",
        ),
        pytest.param(
            EXPERIMENT + "[advanced." + ".".join(["a"] * 300) + "]\nb = 1\n",
            None,
            (),
            ["configs/eval.toml:6: advanced.a: nested too deeply (more than 128 levels"],
            id="deep-toml-tables",
        ),
        pytest.param(
            EXPERIMENT,
            None,
            ("--rows", "3-1,x"),
            ['--rows: "3-1" runs backwards', '--rows: "x" is not a row position'],
            id="bad-rows",
        ),
        pytest.param(
            EXPERIMENT,
            None,
            ("--rows", "5"),
            ["--rows: "],
            id="rows-out-of-range",
        ),
        pytest.param(
            EXPERIMENT.replace('"main.py"', '"../elsewhere/main.py"'),
            None,
            (),
            ["configs/eval.toml:3: experiment.entrypoint: must not contain '..'"],
            id="entrypoint-escapes",
        ),
        pytest.param(
            EXPERIMENT.replace('"main.py"', '"serve.py"'),
            None,
            ("--n", "0"),
            ["--n: must be at least 1"],
            id="bad-flag",
        ),
        pytest.param(
            EXPERIMENT,
            None,
            ("--n", "100000000"),
            ["--n: 1 row × n = 100,000,000 is 100,000,000 work items; a run holds at most"],
            id="huge-n-flag",
        ),
        pytest.param(
            EXPERIMENT + "[evaluation]\nn = " + "9" * 30 + "\n",
            None,
            (),
            ["configs/eval.toml:7: evaluation.n: at most 1,000,000"],
            id="huge-n-config",
        ),
    ],
)
def test_bad_input_exits_2_naming_file_line_and_key(
    tmp_path: Path, config: str, rows: str | None, args: tuple[str, ...], expected: list[str]
) -> None:
    workspace = workspace_with(tmp_path, config, rows)
    result = run_eval("configs/eval.toml", *args, cwd=workspace)
    assert result.returncode == 2, result.stderr
    for text in expected:
        assert text in result.stderr
    assert result.stdout == ""
    assert not (workspace / ".osmosis").exists(), "bad input writes nothing"


def test_problems_in_config_flags_and_dataset_are_reported_together(tmp_path: Path) -> None:
    workspace = workspace_with(
        tmp_path, EXPERIMENT.replace('"main.py"', '"serve.py"'), '{"label": 1}\n'
    )
    result = run_eval("configs/eval.toml", "--rows", "x", "--name", ".hidden", cwd=workspace)
    assert result.returncode == 2
    assert "experiment.entrypoint: entrypoint not found" in result.stderr
    assert '--rows: "x" is not a row position' in result.stderr
    assert "--name: run name '.hidden' must start with a letter or digit" in result.stderr
    assert "data/multiply.jsonl:1: user_prompt: missing" in result.stderr


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("127.0.0.1:8000", "'127.0.0.1:8000' has no scheme: write http://127.0.0.1:8000"),
        ("ftp://127.0.0.1", "'ftp://127.0.0.1': the scheme must be http or https, not 'ftp'"),
        ("http://", "'http://' has no host"),
        ("http://:8000", "'http://:8000' has no host"),
        ("http://127.0.0.1:99999", "'http://127.0.0.1:99999' has a bad port '99999' (1-65535)"),
        ("http://127.0.0.1:0", "'http://127.0.0.1:0' has a bad port '0' (1-65535)"),
        ("http://127.0.0.1:80a", "'http://127.0.0.1:80a' has a bad port '80a' (1-65535)"),
        ("http://[::1", "'http://[::1' is not a URL (Invalid IPv6 URL)"),
        ("http://h:1/?q=1", "'http://h:1/?q=1': a base URL takes no query or fragment"),
    ],
)
def test_a_bad_server_url_exits_2_naming_the_flag_and_the_url(
    tmp_path: Path, url: str, message: str
) -> None:
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(1))
    result = run_eval(
        *("--server", "http://127.0.0.1:8000", "--server", url, "--dataset-file", str(dataset)),
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert errors == [f"osmosis-tui eval: error: argument --server: {message}"]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / ".osmosis").exists(), "bad input writes nothing"


def test_unreachable_server_exits_1_with_nothing_finished(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on once this is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(3))
    url = f"http://127.0.0.1:{port}"
    result = run_eval("--server", url, "--dataset-file", str(dataset), "--name", "x", cwd=tmp_path)
    assert result.returncode == 1
    assert f"no rollout server answered /health ({url}: ConnectError" in result.stdout
    folder = run_folder(tmp_path, "x")
    assert read_jsonl(folder / "events.jsonl") == []
    assert read_jsonl(folder / "index.jsonl") == []
    assert pending_items(folder) == 3
    assert json.loads((folder / "metrics.json").read_text())["eval_run"]["status"] == "incomplete"


def test_server_dying_mid_run_keeps_results_and_a_resume_completes(tmp_path: Path) -> None:
    rows = 12
    dataset = write_jsonl(
        tmp_path / "rows.jsonl", multiply_rows(rows, metadata={"stub": "slow:0.2"})
    )
    folder = run_folder(tmp_path, "dies")
    with served_demo() as server:
        args = ("--dataset-file", str(dataset), "--name", "dies", "--max-in-flight", "2")
        running = start_eval("--server", server.url, *args, cwd=tmp_path)
        eventually_sync(lambda: len(read_jsonl(folder / "events.jsonl")) >= 4, "4 finished items")
        server.kill()
        stdout, stderr = running.finish()
    assert running.returncode == 1, stderr
    assert "(incomplete)" in stdout
    assert "stopped" in stdout
    finished = read_jsonl(folder / "events.jsonl")
    assert 4 <= len(finished) < rows
    index = read_jsonl(folder / "index.jsonl")
    done = {r["row_index"] for r in index if r["status"] == "success"}
    assert done == {e["row_index"] for e in finished}
    assert len(index) == len(finished)
    assert pending_items(folder) == rows - len(finished)

    with served_demo() as server:
        resumed = run_eval("--server", server.url, *args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    events = read_jsonl(folder / "events.jsonl")
    assert Counter(e["row_index"] for e in events) == Counter(range(rows))
    assert all(r["status"] == "success" for r in read_jsonl(folder / "index.jsonl"))


def test_workspace_without_its_entrypoint_says_which_server_to_give(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    workspace = workspace_with(tmp_path, EXPERIMENT.replace('"main.py"', '"serve.py"'))
    missing = run_eval("configs/eval.toml", cwd=workspace)
    assert missing.returncode == 2
    assert "configs/eval.toml: experiment.entrypoint: entrypoint not found" in missing.stderr
    assert "or give --server" in missing.stderr
    # With --server the workspace server is not needed, so its absence is no problem.
    served = run_eval(
        "configs/eval.toml", "--server", demo_server.url, "--chat-url", "stub", cwd=workspace
    )
    assert served.returncode == 0, served.stderr


def test_a_second_run_of_a_live_name_is_refused_at_once(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(2))
    args = ("--server", demo_server.url, "--dataset-file", str(dataset), "--name", "busy")
    output = tmp_path / ".osmosis" / "evals"
    with RunLock.acquire(output, "busy"):  # what a live run of that name holds
        refused = run_eval(*args, cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "run 'busy' is already running" in refused.stderr
    assert "holds .osmosis/evals/.locks/busy.lock;" in refused.stderr
    if Path("/proc/locks").exists():  # where the holder can be named: this test's process
        assert f"(process {os.getpid()})" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (output / "busy").exists(), "refused before anything was written"
    assert run_eval(*args, cwd=tmp_path).returncode == 0  # free once the other run ends


def test_two_live_runs_of_one_name_never_overlap(tmp_path: Path) -> None:
    # Two real `osmosis-tui eval` processes on the embedded demo, whose stuck rows keep the
    # first one alive for minutes: the second is refused at once naming the first, and so is
    # a --fresh one, which must not archive the live run's folder from under it (the live run
    # would go on writing its index and metrics into the new one).
    folder = run_folder(tmp_path, "busy")
    first = start_eval("--headless", "--name", "busy", cwd=tmp_path)
    try:
        eventually_sync(lambda: read_jsonl(folder / "events.jsonl"), "the first run's results")
        manifest = (folder / "manifest.json").read_text()
        for extra in ((), ("--fresh",)):
            refused = run_eval("--headless", "--name", "busy", *extra, cwd=tmp_path)
            assert refused.returncode == 1, refused.stderr
            assert "run 'busy' is already running" in refused.stderr
            if Path("/proc/locks").exists():
                assert f"(process {first.process.pid})" in refused.stderr
            assert "Traceback" not in refused.stderr + refused.stdout
            assert first.returncode is None, "the first run goes on"
        assert sorted(path.name for path in folder.parent.iterdir() if path.is_dir()) == [
            ".locks",
            "busy",
        ], "nothing archived"
        assert (folder / "manifest.json").read_text() == manifest
    finally:
        first.send_signal(signal.SIGINT)
        _, stderr = first.finish()
    assert first.returncode == 1, stderr  # interrupted: what finished is kept
    assert "Traceback" not in stderr  # an error of ours also exits 1, and skips the end
    events = read_jsonl(folder / "events.jsonl")
    assert len(read_jsonl(folder / "index.jsonl")) == len(
        {(e["row_index"], e["run_index"]) for e in events}
    )
    assert (folder / "manifest.json").read_text() == manifest
