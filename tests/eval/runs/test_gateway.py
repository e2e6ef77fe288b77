"""`osmosis-tui eval` and its model gateway (EVAL.md §4): which model, its preflight, the flags,
and what the run records of every model call. The real command, in a subprocess, on loopback."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from core.eval.gateway import upstream_choice
from core.eval.servers.launcher import free_port
from core.serving.loopback import serve_in_loop
from tests.eval.gateway.fake_upstream import FakeUpstream
from tests.eval.runs.command import child_env, run_eval
from tests.eval.runs.files import multiply_rows, read_jsonl, run_folder, summary_of, write_jsonl
from tests.eval.runs.servers import ServedDemo, threaded_server
from tui.cli import main

UPSTREAM_KEY = "sk-upstream-" + "7e2a" * 8


def test_the_demo_records_each_model_call_and_counts_its_tokens(tmp_path: Path) -> None:
    result = run_eval("--rows", "0-7", "--name", "calls", "--headless", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    folder = run_folder(tmp_path, "calls")
    events = read_jsonl(folder / "events.jsonl")
    calls = read_jsonl(folder / "calls.jsonl")
    assert Counter(c["rollout_id"] for c in calls) == Counter(e["rollout_id"] for e in events)
    answered = [c for c in calls if c["status"] == 200]
    assert answered and all(c["total_tokens"] > 0 for c in answered)
    for call in calls:
        assert call["kind"] == "model_call"
        assert call["latency_s"] >= 0 and call["t"] >= 0
        assert call["request"]  # the row's question, as the model got it
    # The items' tokens are the gateway's sums, in the journal, the index and the metrics.
    by_rollout = {c["rollout_id"]: c["total_tokens"] for c in answered}
    assert {e["rollout_id"]: e["tokens"] for e in events if e["rollout_id"] in by_rollout} == (
        by_rollout
    )
    index = read_jsonl(folder / "index.jsonl")
    assert sum(r["tokens"] or 0 for r in index) == sum(by_rollout.values())
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["summary"]["tokens_used"] == sum(by_rollout.values())
    assert summary_of(result.stdout)["tokens"] == sum(by_rollout.values())
    # The headless line of an answered item says its tokens.
    lines = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert len(lines) == 8
    assert sum(1 for line in lines if " tok  " in line) == len(answered)


def test_chat_url_calls_that_server_with_the_configs_model_and_the_key(
    workspace: Path, demo_server: ServedDemo
) -> None:
    fake = FakeUpstream()  # answers "6" with usage 7/1/8
    with threaded_server(lambda: serve_in_loop(fake.app)) as url:
        result = run_eval(
            *("configs/eval/multiply.toml", "--server", demo_server.url, "--chat-url", f"{url}/v1"),
            *("--name", "url", "--json"),
            cwd=workspace,
            env=child_env(ROLLOUT_LLM_API_KEY=UPSTREAM_KEY),
        )
    assert result.returncode == 0, result.stderr
    # The preflight, then one call per rollout: `model` is model_path without its provider.
    assert len(fake.requests) == 1 + 6
    assert {seen.body["model"] for seen in fake.requests} == {"gpt-5-mini"}
    assert {seen.headers["authorization"] for seen in fake.requests} == {f"Bearer {UPSTREAM_KEY}"}
    folder = run_folder(workspace, "url")
    assert [e["tokens"] for e in read_jsonl(folder / "events.jsonl")] == [8] * 6
    assert summary_of(result.stdout)["tokens"] == 48
    for path in folder.rglob("*"):
        if path.is_file():  # every file; the folders (rollout_trials/, ...) hold no text
            assert UPSTREAM_KEY not in path.read_text()
    assert UPSTREAM_KEY not in result.stdout + result.stderr


def test_chat_model_names_the_model_a_server_is_asked_for_and_the_labels_say_what_is_known(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    """Without a config, `--chat-model` is what the model is asked for (as given: a slash in
    a server's own name is no provider prefix), and the run names it, and its rollout
    "external", not the demo's."""
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(3))
    fake = FakeUpstream()
    with threaded_server(lambda: serve_in_loop(fake.app)) as url:
        result = run_eval(
            *("--server", demo_server.url, "--dataset-file", str(dataset)),
            *("--chat-url", f"{url}/v1", "--chat-model", "meta-llama/Llama-3.1-8B"),
            *("--name", "named", "--json"),
            cwd=tmp_path,
            env=child_env(ROLLOUT_LLM_API_KEY=UPSTREAM_KEY),
        )
    assert result.returncode == 0, result.stderr
    assert len(fake.requests) == 1 + 3
    assert {seen.body["model"] for seen in fake.requests} == {"meta-llama/Llama-3.1-8B"}
    eval_run = json.loads((run_folder(tmp_path, "named") / "metrics.json").read_text())["eval_run"]
    assert eval_run["model_name"] == "meta-llama/Llama-3.1-8B"
    assert eval_run["rollout_name"] == "external"


@pytest.mark.parametrize("chat_url", [None, "stub"])
def test_chat_model_without_a_chat_url_server_is_bad_input(
    tmp_path: Path, chat_url: str | None
) -> None:
    flags = ("--chat-url", chat_url) if chat_url else ()
    result = run_eval(*flags, "--chat-model", "gpt-4o", "--headless", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "--chat-model: names the model a --chat-url server is asked for" in result.stderr
    assert not (tmp_path / ".osmosis").exists()


def test_an_unreachable_model_stops_the_run_before_any_rollout(tmp_path: Path) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    result = run_eval("--rows", "0-3", "--chat-url", nobody, "--name", "down", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert (
        "osmosis-tui eval: model preflight for 'osmosis-stub' failed: cannot reach the model at "
        f"{nobody}/chat/completions" in result.stderr
    )
    assert not run_folder(tmp_path, "down").exists(), "nothing was run: no folder is left"


def test_a_workspace_with_no_way_to_its_model_is_bad_input_naming_both(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As on a machine without the extra (it is installed here, for its own tests).
    monkeypatch.setattr(upstream_choice, "litellm_available", lambda: False)
    monkeypatch.chdir(workspace)
    with pytest.raises(SystemExit) as exited:
        main(["eval", "configs/eval/multiply.toml", "--headless"])
    assert exited.value.code == 2
    stderr = capsys.readouterr().err
    assert "--chat-url: the model 'openai/gpt-5-mini' is called through LiteLLM" in stderr
    assert "pip install 'osmosis-tui[litellm]'" in stderr
    assert "--chat-url URL" in stderr
    assert not (workspace / ".osmosis").exists(), "bad input writes nothing"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("--listener-port", "0"), "argument --listener-port: must be at least 1, got 0"),
        (("--listener-port", "65536"), "argument --listener-port: ports go up to 65535"),
        (("--listener-port", "x"), "argument --listener-port: expected a whole number"),
        (
            ("--advertise-url", "localhost:8000"),
            "argument --advertise-url: 'localhost:8000' has no scheme: write http://localhost:8000",
        ),
        (
            ("--advertise-url", "ftp://example.com"),
            "argument --advertise-url: 'ftp://example.com': the scheme must be http or https",
        ),
        (
            ("--advertise-url", "https://proxy.example/?via=1"),
            "argument --advertise-url: 'https://proxy.example/?via=1': a base URL takes no query",
        ),
        (("--chat-url", "127.0.0.1:8000/v1"), "--chat-url: expected an http:// or https:// URL"),
    ],
)
def test_bad_gateway_flags_exit_2_naming_the_flag(
    tmp_path: Path, flags: tuple[str, ...], expected: str
) -> None:
    result = run_eval(*flags, "--headless", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert not [path for path in (tmp_path / ".osmosis" / "evals").glob("*") if path.is_dir()]


def test_the_gateway_listens_where_it_is_told_and_rollouts_reach_it_as_advertised(
    tmp_path: Path,
) -> None:
    port = free_port()
    advertised = f"http://localhost:{port}"
    result = run_eval(
        *("--rows", "0-3", "--name", "fixed", "--json"),
        *("--listener-port", str(port), "--advertise-url", advertised),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    folder = run_folder(tmp_path, "fixed")
    logs = (folder / "logs.txt").read_text()
    assert f"model gateway on http://127.0.0.1:{port}, advertised as {advertised}" in logs
    assert len(read_jsonl(folder / "calls.jsonl")) == 4
