"""Real run folders for the compare tests, made by real runs on one official-layout workspace.

The workspace is `tests/conformance/results_workspace` (a rollout on the official osmosis-ai
0.3.8 SDK that asks the model the row's question and passes it when the reply holds the
label) with the rows of `ROWS` and `n = 2`. A stub model that follows a plan
(`planned_model`) answers run A's and run B's requests: each row says what the model does in
A and in B, attempt by attempt, so the class of every work item is known before the runs.

`make_runs` runs, each with one rollout in flight (so attempts reach the model in order), the
official ones beside ours:

- `official_a`, `official_b`: the official `osmosis eval run` (the conformance venv);
- `ours_a`, `ours_b`: `osmosis-tui eval --server` against the same rollout served by hand;
- `ours_c`: ours with plan B on source rows 0-5 and `--n 3` (items only in one run);
- `ours_partial`: ours on source rows 6-11, its own plan, interrupted (Ctrl-C) while the last
  item's model call hangs, so its last item is pending;
- `ours_edited`: ours on another dataset file, whose first row is the first of ROWS and whose
  other two ask other questions;
- `ours_other`: ours on that file's rows 1-2 alone: no row it holds is one of ROWS;
- `ours_untraced`: ours on that file, against a server that keeps its trials elsewhere (as
  one started by hand without `_OSMOSIS_ROLLOUT_ARTIFACT_ROOT` does): nothing in its folder
  says what its rows held.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.eval.plan.config import load_config
from tests.conformance.official_eval import (
    CONFIG,
    DATASET,
    EVALS,
    WORKSPACE,
    envelope,
    make_workspace,
    official_rollout_server,
    run_official_eval,
    run_our_eval,
    stub_model,
)
from tests.eval.runs.command import start_eval
from tests.eval.runs.files import read_jsonl
from tests.polling import eventually_sync

N = 2
#: Each rollout's workflow deadline: a `slow:` answer beyond it is a timeout error.
AGENT_TIMEOUT_SEC = 4
SLOW = f"slow:{AGENT_TIMEOUT_SEC * 2}"
#: The partial run's hanging call: far beyond anything, ended by the interrupt.
HANG = "slow:120"
OTHER_DATASET = "data/other.jsonl"
ONE_IN_FLIGHT = ("--max-in-flight", "1")


@dataclass(frozen=True)
class Row:
    """A dataset row and what the model answers it in run A and in run B, attempt by attempt
    (`planned_model` directives, the last one repeated)."""

    question: str
    label: str
    a: tuple[str, ...]
    b: tuple[str, ...]
    system: str | None = None
    skip: bool = False

    def line(self) -> dict[str, Any]:
        row: dict[str, Any] = {"user_prompt": self.question, "ground_truth": self.label}
        if self.system is not None:
            row["system_prompt"] = self.system
        if self.skip:
            row["metadata"] = {"skip": True}
        return row


# Labels of two digits: an answer off by 1 or 2 (the stub's `wrong`) never holds one.
ROWS = (
    Row("What is 2 * 7?", "14", ("ok",), ("ok",)),
    Row("What is 3 * 7?", "21", ("ok",), ("wrong",), system="Answer with a number."),
    Row("What is 4 * 7?", "28", ("wrong",), ("ok",)),
    Row("What is 5 * 7?", "35", ("ok", "wrong"), ("ok",)),
    Row("What is 6 * 7?", "42", ("ok",), ("wrong", "ok")),
    # Answered right, but the label is another number: a plain failure in both.
    Row("What is 3 * 8?", "99", ("ok",), ("ok",)),
    # The workflow raises before it asks the model: an agent_error in both.
    Row("FAIL: What is 4 * 8?", "32", ("ok",), ("ok",)),
    Row("What is 5 * 8?", "40", ("wrong",), ("error",)),
    # An HTTP 500 (agent_error) in A; in B a call that outlasts the deadline (timeout), then
    # the same HTTP 500 again.
    Row("What is 6 * 8?", "48", ("error",), (SLOW, "error")),
    Row("What is 7 * 8?", "56", ("ok",), ("ok",), skip=True),
    Row("What is 8 * 8?", "64", ("error",), ("ok",)),
    Row("What is 9 * 8?", "72", ("error",), ("wrong",)),
)
#: `ours_partial`: source rows 6-11 (B's answers, the timeout row erring at once), the last
#: item's call hanging until the run is interrupted.
PARTIAL_ROWS = "6-11"
PARTIAL_PLAN = {
    **{row.question: list(row.b) for row in ROWS[6:]},
    ROWS[8].question: ["error"],
    ROWS[11].question: ["wrong", HANG],
}
#: `ours_edited` and `ours_other`: the first row of ROWS, then two it does not hold.
OTHER_ROWS = (
    ROWS[0],
    Row("What is 12 * 3?", "36", (), ()),
    Row("What is 13 * 3?", "39", (), ()),
)


@dataclass(frozen=True)
class RealRuns:
    workspace: Path
    tmp: Path

    @property
    def root(self) -> Path:
        """The results root (`-o`) holding every run."""
        return self.workspace / EVALS

    def folder(self, name: str) -> Path:
        return self.root / name


def plan_of(side: str) -> dict[str, list[str]]:
    return {row.question: list(row.a if side == "a" else row.b) for row in ROWS}


def jsonl(rows: tuple[Row, ...]) -> str:
    return "".join(json.dumps(row.line()) + "\n" for row in rows)


def workspace_files() -> dict[str, str]:
    """What the compare workspace writes over `results_workspace/`: its rows, and its config
    with `n` and the workflow deadline of these tests."""
    config = (WORKSPACE / CONFIG).read_text(encoding="utf-8")
    config = re.sub(r"(?m)^n = \d+$", f"n = {N}", config)
    config = re.sub(
        r"(?m)^agent_workflow_timeout_s = \d+$",
        f"agent_workflow_timeout_s = {AGENT_TIMEOUT_SEC}",
        config,
    )
    return {CONFIG: config, DATASET: jsonl(ROWS), OTHER_DATASET: jsonl(OTHER_ROWS)}


@contextmanager
def planned_model(tmp: Path, name: str, plan: Mapping[str, list[str]]) -> Iterator[str]:
    """A fresh planned stub model (its request counts start at 0) for the run `name`."""
    path = tmp / f"{name}.plan.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    program = ("-m", "tests.compare.planned_model")
    with stub_model(tmp / f"{name}.model.log", program, args=(str(path),)) as url:
        yield url


@contextmanager
def rollout_server(
    python: Path, runs: RealRuns, name: str, *, trials: Path | None = None
) -> Iterator[str]:
    """The workspace's rollout served by hand for our run `name`, its trials in that run's
    folder (as `osmosis-tui eval` launching it would put them) unless `trials` says where."""
    env = load_config(runs.workspace / CONFIG).env
    trials = trials or runs.folder(name) / "rollout_trials"
    with official_rollout_server(
        python, runs.workspace, trials, env, runs.tmp / f"{name}.server.log"
    ) as url:
        yield url


def official_run(python: Path, runs: RealRuns, name: str, plan: Mapping[str, list[str]]) -> None:
    with planned_model(runs.tmp, name, plan) as model_url:
        envelope(
            run_official_eval(python, runs.workspace, model_url, "--name", name, *ONE_IN_FLIGHT)
        )


def our_run(
    python: Path,
    runs: RealRuns,
    name: str,
    plan: Mapping[str, list[str]],
    *flags: str,
    trials: Path | None = None,
) -> None:
    with (
        planned_model(runs.tmp, name, plan) as model_url,
        rollout_server(python, runs, name, trials=trials) as server_url,
    ):
        envelope(
            run_our_eval(
                runs.workspace,
                *("--server", server_url, "--chat-url", model_url, "--name", name),
                *ONE_IN_FLIGHT,
                *flags,
            )
        )


def interrupted_run(python: Path, runs: RealRuns, name: str) -> None:
    """`ours_partial`: interrupted once its last item (source row 11, attempt 1) is on the
    server, where its model call hangs (the workflow deadline raised past the hang)."""
    folder = runs.folder(name)
    last = (len(ROWS[6:]) - 1, N - 1)  # (row_index, run_index) in this run's selection
    with (
        planned_model(runs.tmp, name, PARTIAL_PLAN) as model_url,
        rollout_server(python, runs, name) as server_url,
    ):
        running = start_eval(
            str(runs.workspace / CONFIG),
            *("--dataset-file", str(runs.workspace / DATASET), "--headless", "--json"),
            *("--server", server_url, "--chat-url", model_url, "--name", name),
            *("--rows", PARTIAL_ROWS, "--agent-timeout", "600", *ONE_IN_FLIGHT),
            cwd=runs.tmp,
        )

        def last_item_started() -> bool:
            return any(
                t["kind"] == "status" and (t["row_index"], t["run_index"]) == last
                for t in read_jsonl(folder / "transitions.jsonl")
            )

        try:
            eventually_sync(last_item_started, "the partial run's last item on the server")
        finally:
            running.send_signal(signal.SIGINT)
            _, stderr = running.finish()
        assert running.returncode == 1, stderr  # work items left pending


def make_runs(python: Path, tmp: Path) -> RealRuns:
    """Every run; the official ones beside ours (each run has its own model, server and
    folder, so they do not meet), which halves the wait: most of a run is starting up."""
    runs = RealRuns(make_workspace(tmp / "ws", workspace_files()), tmp)
    with ThreadPoolExecutor(max_workers=1) as official:
        done = [
            official.submit(official_run, python, runs, f"official_{side}", plan_of(side))
            for side in ("a", "b")
        ]
        our_runs(python, runs)
        for future in done:
            future.result()  # a failed official run fails here, with its output
    return runs


def our_runs(python: Path, runs: RealRuns) -> None:
    tmp = runs.tmp
    for side in ("a", "b"):
        our_run(python, runs, f"ours_{side}", plan_of(side))
    our_run(python, runs, "ours_c", plan_of("b"), "--rows", "0-5", "--n", "3")
    interrupted_run(python, runs, "ours_partial")
    our_run(python, runs, "ours_edited", {}, "--dataset-file", OTHER_DATASET)
    our_run(python, runs, "ours_other", {}, "--dataset-file", OTHER_DATASET, "--rows", "1-2")
    # A server started by hand without the run's folder as its artifact root.
    our_run(
        python, runs, "ours_untraced", {}, "--dataset-file", OTHER_DATASET, trials=tmp / "elsewhere"
    )
