"""The inputs of one `osmosis-tui eval` run turned into a checked plan (EVAL.md §2–§3).

`prepare()` reads the config and the dataset, selects the rows and names the run, without
touching the network or writing results: bad input is an `InputError` listing every problem
(exit 2). `core.eval.session.EvalSession` runs the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from core.eval.config import EvalConfig, load_config
from core.eval.dataset import Dataset, DatasetRow, load_dataset, parse_rows_spec, select_rows
from core.eval.errors import InputError, InputProblem
from core.eval.launcher import LaunchError, resolve_entrypoint
from core.eval.results.durable import describe_os_error
from core.eval.results.folder import (
    RunFolderError,
    default_run_name,
    manifest_inputs,
    validate_run_name,
)
from core.eval.results.metrics import DEFAULT_PASS_THRESHOLD
from core.eval.results.records import WorkItem
from core.eval.upstream_choice import STUB_MODEL, UpstreamChoice, choose_upstream

DEFAULT_OUTPUT = Path(".osmosis/evals")
DEMO_DATASET_NAME = "demo"
ServerMode = Literal["servers", "workspace", "embedded"]
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class EvalRequest:
    """What the user asked for: flags, with config values filled in by `prepare()`."""

    config_path: Path | None = None
    servers: tuple[str, ...] = ()
    server_api_key: str | None = field(default=None, repr=False)
    dataset_file: Path | None = None
    chat_url: str | None = None
    """`--chat-url`: an OpenAI-compatible base URL, or "stub"."""
    llm_api_key: str | None = field(default=None, repr=False)
    """The `--chat-url` server's key (`ROLLOUT_LLM_API_KEY`); never sent to a rollout."""
    listener_port: int | None = None
    """`--listener-port`: the model gateway's fixed port (None: a free one)."""
    advertise_url: str | None = None
    """`--advertise-url`: the gateway's base URL as rollouts reach it."""
    limit: int | None = None
    rows: str | None = None
    n: int | None = None
    max_in_flight: int | None = None
    agent_timeout_sec: float | None = None
    grader_timeout_sec: float | None = None
    pass_threshold: float | None = None
    output: Path = DEFAULT_OUTPUT
    name: str | None = None
    fresh: bool = False
    retry_failed: bool = False
    stuck_after_sec: float | None = None


@dataclass(frozen=True)
class EvalPlan:
    request: EvalRequest
    config: EvalConfig | None
    dataset: Dataset
    dataset_name: str
    model_name: str
    rollout_name: str
    rows: dict[int, DatasetRow]
    items: tuple[WorkItem, ...]
    n: int
    pass_threshold: float
    agent_timeout_sec: float | None
    grader_timeout_sec: float | None
    batch_size: int | None
    run_name: str
    mode: ServerMode
    upstream: UpstreamChoice
    """The model the gateway calls for the rollouts."""

    @property
    def inputs(self) -> dict[str, Any]:
        return manifest_inputs(
            model_path=self.model_name,
            dataset_sha256=self.dataset.sha256,
            selected_source_rows=[row.source_row_index for row in self.rows.values()],
            n=self.n,
            rollout=self.rollout_name,
            agent_timeout_s=self.agent_timeout_sec,
            grader_timeout_s=self.grader_timeout_sec,
        )


def prepare(request: EvalRequest) -> EvalPlan:
    """Load and check every input; all problems found are raised together."""
    problems: list[InputProblem] = []
    config: EvalConfig | None = None
    if request.config_path is not None:
        try:
            config = load_config(request.config_path)
        except InputError as exc:
            problems.extend(exc.problems)
    mode: ServerMode = (
        "servers" if request.servers else "workspace" if request.config_path else "embedded"
    )
    if config is not None and mode == "workspace":
        try:
            resolve_entrypoint(config.workspace, config.rollout, config.entrypoint)
        except LaunchError as exc:
            problems.append(
                InputProblem(
                    str(config.path),
                    None,
                    "experiment.entrypoint",
                    f"{exc}; fix the config, or give --server URL of a running rollout server",
                )
            )
    if request.name is not None:
        try:
            validate_run_name(request.name)
        except RunFolderError as exc:
            problems.append(InputProblem("--name", None, None, str(exc)))
    upstream: UpstreamChoice | None = None
    try:
        upstream = choose_upstream(request.chat_url, config.model_path if config else None)
    except ValueError as exc:
        problems.append(InputProblem("--chat-url", None, None, str(exc)))
    rows_spec = request.rows
    positions = _collect(problems, parse_rows_spec, rows_spec) if rows_spec is not None else None
    dataset_path = _dataset_path(request, config, problems)
    dataset = _collect(problems, load_dataset, dataset_path) if dataset_path is not None else None
    if problems or dataset is None or dataset_path is None or upstream is None:
        raise InputError(problems)
    limit = request.limit if request.limit is not None else config.limit if config else None
    selected = select_rows(dataset.rows, limit=limit, rows=positions)
    if not selected:
        raise InputError.single(str(dataset_path), "no rows selected")
    n = request.n if request.n is not None else (config.n if config and config.n else 1)
    rows = dict(enumerate(selected))
    items = tuple(
        WorkItem(row_index=index, run_index=run, source_row_index=row.source_row_index)
        for index, row in rows.items()
        for run in range(n)
    )
    if config is not None:
        dataset_name = config.dataset
    else:
        dataset_name = dataset_path.stem if mode == "servers" else DEMO_DATASET_NAME
    stem = request.config_path.stem if request.config_path else dataset_name
    return EvalPlan(
        request=request,
        config=config,
        dataset=dataset,
        dataset_name=dataset_name,
        model_name=config.model_path if config else STUB_MODEL,
        rollout_name=config.rollout if config else DEMO_DATASET_NAME,
        rows=rows,
        items=items,
        n=n,
        pass_threshold=_first(
            request.pass_threshold,
            config.pass_threshold if config else None,
            DEFAULT_PASS_THRESHOLD,
        ),
        agent_timeout_sec=_first(
            request.agent_timeout_sec, config.agent_timeout_sec if config else None
        ),
        grader_timeout_sec=_first(
            request.grader_timeout_sec, config.grader_timeout_sec if config else None
        ),
        batch_size=config.batch_size if config else None,
        run_name=request.name or default_run_name(stem),
        mode=mode,
        upstream=upstream,
    )


def _collect(problems: list[InputProblem], load: Callable[[T], R], argument: T) -> R | None:
    """`load(argument)`, or None with its problems added to `problems`."""
    try:
        return load(argument)
    except InputError as exc:
        problems.extend(exc.problems)
        return None


def _first(*values: Any) -> Any:
    return next((value for value in values if value is not None), None)


def _dataset_path(
    request: EvalRequest, config: EvalConfig | None, problems: list[InputProblem]
) -> Path | None:
    if request.dataset_file is not None:
        return request.dataset_file
    if request.config_path is not None:
        if config is None:
            return None  # the config's own problems say why
        path = config.default_dataset_path()
        if path is None:
            problems.append(
                InputProblem(
                    str(config.path),
                    None,
                    "experiment.dataset",
                    f"no data/{config.dataset}.jsonl or .csv in {config.workspace}; "
                    "give --dataset-file",
                )
            )
        return path
    if request.servers:
        problems.append(
            InputProblem("--dataset-file", None, None, "give --dataset-file with --server")
        )
        return None
    # The zero-setup demo: the bundled dataset, written where the run's results go. Imported
    # here: only the demo needs the embedded server stack.
    from core.eval.embedded import refresh_demo_dataset

    target = request.output / "demo-dataset.jsonl"
    try:
        refresh_demo_dataset(target)
    except OSError as exc:
        problems.append(
            InputProblem(
                "--output",
                None,
                None,
                f"cannot write the demo dataset under {request.output}: {describe_os_error(exc)}",
            )
        )
        return None
    return target
