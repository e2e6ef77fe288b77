"""The inputs of one `osmosis-tui eval` run turned into a checked plan (EVAL.md §1–§3).

`prepare()` finds the workspace, reads the config, the secrets and the dataset, selects the
rows and names the run, without touching the network or writing results: bad input is an
`InputError` listing every problem (exit 2). `core.eval.session.EvalSession` runs the plan.

With a config, the workspace root is the folder above it holding `rollouts/` and `configs/`
(`core.eval.plan.config.workspace_root`), and every relative path of the run (`--output`,
`--dataset-file`, `--secrets-file`) is taken from there, wherever the command was started.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from core.eval.compare.baseline import Baseline
from core.eval.compare.compared_run import ComparedRun, CompareInputError, read_compared_run
from core.eval.cost.price import NO_PRICE, RunPrice, TokenPrice, run_price
from core.eval.errors import EvalError, InputError, InputProblem
from core.eval.gateway.upstream_choice import UpstreamChoice, choose_upstream
from core.eval.hedging import HedgeAfter
from core.eval.plan.config import EvalConfig, load_config, workspace_root
from core.eval.plan.dataset import Dataset, DatasetRow, load_dataset, parse_rows_spec, select_rows
from core.eval.plan.output_root import DEFAULT_OUTPUT, located, near
from core.eval.plan.secret_values import STDIN, available_values, read_secrets_file
from core.eval.results.durable import describe_os_error
from core.eval.results.events import Journal
from core.eval.results.folder import (
    EVENTS_FILE,
    RunFolderError,
    default_run_name,
    validate_run_name,
)
from core.eval.results.manifest import manifest_inputs
from core.eval.results.metrics import DEFAULT_PASS_THRESHOLD
from core.eval.results.provenance import run_provenance
from core.eval.results.records import MAX_WORK_ITEMS, ItemKey, ItemResult, WorkItem
from core.eval.results.source_digest import EMPTY_SOURCE_DIGEST, rollout_source_digest
from core.eval.servers.directory import read_servers_file
from core.eval.servers.launcher import LaunchError, resolve_entrypoint

DEMO_DATASET_NAME = "demo"
# The manifest's rollout name and entrypoint for servers given by URL alone (no config says
# which rollout they run): their code is not here, and nothing else is known of it.
EXTERNAL_ROLLOUT = "external"
EXTERNAL_ENTRYPOINT = "external"
ServerMode = Literal["servers", "workspace", "embedded"]
DatasetSource = Literal["explicit", "workspace", "bundled"]
"""Where the rows came from: `--dataset-file`, `<root>/data/<experiment.dataset>.*`, the demo's."""
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class EvalRequest:
    """What the user asked for: flags, with config values filled in by `prepare()`."""

    config_path: Path | None = None
    servers: tuple[str, ...] = ()
    """`--server` URLs."""
    servers_file: Path | None = None
    """`--servers-file`: one server URL a line, read again while the run lives."""
    server_api_key: str | None = field(default=None, repr=False)
    dataset_file: Path | None = None
    chat_url: str | None = None
    """`--chat-url`: an OpenAI-compatible base URL, or "stub"."""
    chat_model: str | None = None
    """`--chat-model`: the model name the `--chat-url` server is asked for, as given."""
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
    """`-o/--output`: the results root; relative to the workspace root with a config."""
    name: str | None = None
    fresh: bool = False
    retry_failed: bool = False
    stuck_after_sec: float | None = None
    hedge_after: HedgeAfter | None = None
    """`--hedge-after`: when a slow work item is sent a second time (None: never)."""
    requeue_stuck: int = 0
    """`--requeue-stuck`: how often a stuck work item is requeued by rule (0: never)."""
    secrets_file: str | None = None
    """`--secrets-file`: a dotenv file for the config's `[secrets]`, or "-" for stdin."""
    rollout_port: int | None = None
    """`--rollout-port`: the launched workspace server's fixed port (None: a free one)."""
    events_port: int | None = None
    """`--events-port`: the event receiver's fixed port (None: a free one)."""
    baseline: str | None = None
    """`--baseline`: the run compared with live, a run folder or a run name under `output`."""
    price_per_mtok: TokenPrice | None = None
    """`--price-per-mtok IN,OUT`: the model's price, USD per million tokens."""
    budget_usd: float | None = None
    """`--budget USD`: the most the run's model calls may cost (`core.eval.cost.spend`)."""


@dataclass(frozen=True)
class EvalPlan:
    request: EvalRequest
    """The request with its paths resolved (against the workspace root, with a config)."""
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
    inputs: dict[str, Any]
    """The run's resume lock: `manifest.json`'s `inputs` (`core.eval.results.manifest`)."""
    provenance: dict[str, Any]
    """What this invocation runs, for a new run's manifest (`core.eval.results.provenance`)."""
    dataset_source: DatasetSource = "explicit"
    workspace: Path | None = None
    """The workspace root (absolute), when there is a config."""
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    """The values of the config's `[secrets]` names; never written anywhere."""
    baseline: Baseline | None = field(default=None, repr=False, compare=False)
    """`--baseline`: the run compared with live, read once here, before anything starts."""
    price: RunPrice = NO_PRICE
    """How the model's calls are priced (`core.eval.cost.price`)."""

    @property
    def model_label(self) -> str:
        """The model as the front ends name it: what is asked, and where when that is a URL."""
        return self.upstream.label()

    @property
    def rollout_label(self) -> str:
        """The rollout as the front ends name it: with servers given by URL alone, where it
        runs (its name says only that it is none of ours)."""
        if self.config is not None or self.mode != "servers":
            return self.rollout_name
        servers, listed = self.request.servers, self.request.servers_file
        if listed is not None:
            where = f"the servers of {listed}" + (f" and {len(servers)} more" if servers else "")
        else:
            where = servers[0] if len(servers) == 1 else f"{len(servers)} servers"
        return f"{self.rollout_name} at {where}"


def prepare(request: EvalRequest, *, flag_problems: Sequence[InputProblem] = ()) -> EvalPlan:
    """Load and check every input; all problems found are raised together, after
    `flag_problems` (what the front end found wrong with its own flags)."""
    root = workspace_root(request.config_path) if request.config_path is not None else None
    request = _rooted(request, root)
    read = _read_inputs(request, list(flag_problems))
    config, dataset = read.config, read.dataset
    rows, n = _selected_rows(request, read)
    items = tuple(
        WorkItem(row_index=index, run_index=run, source_row_index=row.source_row_index)
        for index, row in rows.items()
        for run in range(n)
    )
    names = _names(request, read)
    agent_timeout_sec = _first(
        request.agent_timeout_sec, config.agent_timeout_sec if config else None
    )
    grader_timeout_sec = _first(
        request.grader_timeout_sec, config.grader_timeout_sec if config else None
    )
    pass_threshold: float = _first(
        request.pass_threshold,
        config.pass_threshold if config else None,
        DEFAULT_PASS_THRESHOLD,
    )
    entrypoint, source_digest = _rollout_source(request, config, read.mode)
    run_name = request.name or default_run_name(names.stem)
    baseline = None
    if read.baseline is not None:
        baseline = _comparable_baseline(
            read.baseline,
            request,
            run_name=run_name,
            dataset_sha256=dataset.sha256,
            rows=rows,
            pass_threshold=pass_threshold,
        )
    inputs = manifest_inputs(
        model_path=names.model,
        dataset_sha256=dataset.sha256,
        selected_source_rows=[row.source_row_index for row in rows.values()],
        n=n,
        rollout_name=names.rollout,
        entrypoint=entrypoint,
        source_digest=source_digest,
        env=config.env if config else {},
        secret_names=config.required_secrets if config else (),
        agent_timeout_sec=agent_timeout_sec,
        grader_timeout_sec=grader_timeout_sec,
    )
    provenance = run_provenance(
        workspace=config.workspace if config else None,
        config_path=config.path if config else None,
        config_branch=config.branch if config else None,
        config_commit_sha=config.commit_sha if config else None,
        advanced=config.advanced if config else None,
        pass_threshold=pass_threshold,
    )
    return EvalPlan(
        request=request,
        config=config,
        dataset=dataset,
        dataset_name=names.dataset,
        model_name=names.model,
        rollout_name=names.rollout,
        rows=rows,
        items=items,
        n=n,
        pass_threshold=pass_threshold,
        agent_timeout_sec=agent_timeout_sec,
        grader_timeout_sec=grader_timeout_sec,
        batch_size=config.batch_size if config else None,
        run_name=run_name,
        mode=read.mode,
        upstream=read.upstream,
        price=read.price,
        dataset_source=(
            "explicit"
            if request.dataset_file is not None
            else "workspace"
            if config is not None
            else "bundled"
        ),
        workspace=root,
        secrets=(
            {name: read.secret_values[name] for name in config.required_secrets} if config else {}
        ),
        inputs=inputs,
        provenance=provenance,
        baseline=baseline,
    )


@dataclass(frozen=True)
class _Inputs:
    """The inputs read and checked: what the rest of the plan is decided from."""

    config: EvalConfig | None
    secret_values: Mapping[str, str]
    mode: ServerMode
    upstream: UpstreamChoice
    dataset: Dataset
    dataset_path: Path
    positions: Sequence[int] | None
    """The rows `--rows` names (positions in the dataset), or None for every row."""
    baseline: ComparedRun | None = None
    """The `--baseline` run as read, not yet checked against the selection."""
    price: RunPrice = NO_PRICE


def _read_inputs(request: EvalRequest, problems: list[InputProblem]) -> _Inputs:
    """Read the secrets, the config and the dataset and check the flags against them;
    `InputError` with every problem found (and those already in `problems`)."""
    from_file: dict[str, str] = {}
    if request.secrets_file is not None:
        if request.config_path is None:
            problems.append(
                InputProblem(
                    "--secrets-file",
                    None,
                    None,
                    "supplies the values of a config's [secrets] names, and there is no config",
                )
            )
        else:
            from_file = _collect(problems, read_secrets_file, request.secrets_file) or {}
    secret_values = available_values(from_file)
    config: EvalConfig | None = None
    if request.config_path is not None:
        try:
            config = load_config(request.config_path, secret_values=secret_values)
        except InputError as exc:
            problems.extend(exc.problems)
    given_servers = bool(request.servers) or request.servers_file is not None
    mode: ServerMode = (
        "servers" if given_servers else "workspace" if request.config_path else "embedded"
    )
    if request.servers_file is not None:
        _collect(problems, read_servers_file, request.servers_file)
    _check_server_flags(request, config, mode, problems)
    if request.name is not None:
        try:
            validate_run_name(request.name)
        except RunFolderError as exc:
            problems.append(InputProblem("--name", None, None, str(exc)))
    upstream: UpstreamChoice | None = None
    try:
        upstream = choose_upstream(
            request.chat_url, config.model_path if config else None, request.chat_model
        )
    except ValueError as exc:
        problems.append(InputProblem("--chat-url", None, None, str(exc)))
    price = _run_price(request, upstream, problems) if upstream is not None else NO_PRICE
    rows_spec = request.rows
    positions = _collect(problems, parse_rows_spec, rows_spec) if rows_spec is not None else None
    dataset_path = _dataset_path(request, config, problems)
    dataset = _collect(problems, load_dataset, dataset_path) if dataset_path is not None else None
    baseline = _read_baseline(request, problems) if request.baseline is not None else None
    if problems or dataset is None or dataset_path is None or upstream is None:
        raise InputError(problems)
    return _Inputs(
        config, secret_values, mode, upstream, dataset, dataset_path, positions, baseline, price
    )


def _run_price(
    request: EvalRequest, upstream: UpstreamChoice, problems: list[InputProblem]
) -> RunPrice:
    """The model's price; a `--budget` with none known is a problem, never ignored. A
    `--chat-url` model is looked up in LiteLLM's table only for a budget: loading LiteLLM
    takes seconds, and the strip's spend is no reason to make every run wait for it."""
    if request.budget_usd is None and request.price_per_mtok is None:
        return NO_PRICE if upstream.kind != "litellm" else run_price(upstream, None)
    price = run_price(upstream, request.price_per_mtok)
    if request.budget_usd is not None and not price.known:
        problems.append(
            InputProblem(
                "--budget",
                None,
                None,
                f"no price is known for {upstream.label()}: give it with --price-per-mtok "
                "IN,OUT (USD per million input and output tokens)",
            )
        )
    return price


def _read_baseline(request: EvalRequest, problems: list[InputProblem]) -> ComparedRun | None:
    """The `--baseline` run, found as `compare` finds a run: a run folder, else a run of that
    name under the results root; None with the problem added when it is neither, or cannot
    be read."""
    from core.eval.attach.run_list import find_run_folder

    given = request.baseline
    assert given is not None
    folder = find_run_folder(given, request.output)
    if folder is None:
        problems.append(
            InputProblem(
                "--baseline",
                None,
                None,
                f"{given}: neither a run folder nor a run under {request.output}",
            )
        )
        return None
    try:
        return read_compared_run(folder, label=given)
    except CompareInputError as exc:
        problems.append(InputProblem("--baseline", None, None, str(exc)))
        return None


def _comparable_baseline(
    run: ComparedRun,
    request: EvalRequest,
    *,
    run_name: str,
    dataset_sha256: str,
    rows: Mapping[int, DatasetRow],
    pass_threshold: float,
) -> Baseline:
    """The baseline `run`, once it is known to be comparable with this run live: another run,
    of the same dataset file (a live run cannot check rows' contents; `compare` can, after
    the run), with a source row of this run's selection."""
    given = request.baseline

    def refused(message: str) -> InputError:
        return InputError.single("--baseline", f"{given}: {message}")

    if run.folder.resolve() == (request.output / run_name).resolve():
        raise refused(f"is this run itself ({run_name}): give another run to compare with")
    if run.dataset_sha256 != dataset_sha256:
        raise refused(
            f"ran another dataset file (sha256 {_short(run.dataset_sha256)}, this run's "
            f"{_short(dataset_sha256)}): a live comparison cannot check that its rows are this "
            f"run's; run this one without --baseline, then `osmosis-tui compare {given} "
            f"{run_name}`, which checks the rows' contents"
        )
    baseline = Baseline.of(run, threshold=pass_threshold)
    selected = [row.source_row_index for row in rows.values()]
    if not baseline.shares_rows(selected):
        raise refused(
            f"has none of the {len(selected):,} source rows this run selects "
            f"({_span(selected)}; it ran {_span(run.source_rows)}): nothing to compare"
        )
    return baseline


def _short(digest: str | None) -> str:
    return "unknown" if digest is None else digest[:12]


def _span(rows: Sequence[int]) -> str:
    """Source rows in a few characters: "rows 0-9", "row 4", "no rows"."""
    if not rows:
        return "no rows"
    low, high = min(rows), max(rows)
    return f"row {low}" if low == high else f"rows {low}-{high}"


def _check_server_flags(
    request: EvalRequest, config: EvalConfig | None, mode: ServerMode, problems: list[InputProblem]
) -> None:
    """A workspace server the eval can launch, and `--rollout-port` only for one."""
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
    if request.rollout_port is not None and mode != "workspace":
        problems.append(
            InputProblem(
                "--rollout-port",
                None,
                None,
                "fixes the port of the workspace rollout server the eval launches; "
                + ("with --server" if mode == "servers" else "the demo")
                + " there is none to launch",
            )
        )


def _selected_rows(request: EvalRequest, read: _Inputs) -> tuple[dict[int, DatasetRow], int]:
    """The rows the run takes (by position among them) and `n`, each row's attempts."""
    config = read.config
    # As official, --rows replaces evaluation.limit; an explicit --limit still applies.
    config_limit = config.limit if config is not None and read.positions is None else None
    limit = request.limit if request.limit is not None else config_limit
    selected = select_rows(read.dataset.rows, limit=limit, rows=read.positions)
    if not selected:
        raise InputError.single(str(read.dataset_path), "no rows selected")
    n = request.n if request.n is not None else (config.n if config and config.n else 1)
    _check_work_items(len(selected), n, request, config, read.dataset_path)
    return dict(enumerate(selected)), n


@dataclass(frozen=True)
class _Names:
    """What the run's files call its dataset, model and rollout, and its default name's stem."""

    dataset: str
    model: str
    rollout: str
    stem: str


def _names(request: EvalRequest, read: _Inputs) -> _Names:
    config = read.config
    if config is not None:
        dataset = config.dataset
    else:
        dataset = read.dataset_path.stem if read.mode == "servers" else DEMO_DATASET_NAME
    if config is not None:
        rollout = config.rollout
    else:
        rollout = EXTERNAL_ROLLOUT if read.mode == "servers" else DEMO_DATASET_NAME
    return _Names(
        dataset=dataset,
        # Without a config: the name the model is asked for (`--chat-model`, else the stub's).
        model=config.model_path if config else read.upstream.model_path,
        rollout=rollout,
        stem=request.config_path.stem if request.config_path else dataset,
    )


def _check_work_items(
    rows: int, n: int, request: EvalRequest, config: EvalConfig | None, dataset_path: Path
) -> None:
    """Refuse a run of more than `MAX_WORK_ITEMS` (before any is built), naming what made
    it so large: `--n`, the config's `evaluation.n`, or the rows selected."""
    total = rows * n
    if total <= MAX_WORK_ITEMS:
        return
    if request.n is not None:
        source, key, fix = "--n", None, "lower --n, or "
    elif n > 1 and config is not None:
        source, key, fix = str(config.path), "evaluation.n", "lower evaluation.n, or "
    else:
        source, key, fix = str(dataset_path), None, ""
    raise InputError.single(
        source,
        f"{rows:,} row{'s' if rows != 1 else ''} × n = {n:,} is {total:,} work items; "
        f"a run holds at most {MAX_WORK_ITEMS:,}: {fix}select fewer rows (--rows, --limit)",
        key=key,
    )


def _rooted(request: EvalRequest, root: Path | None) -> EvalRequest:
    """`request` with its relative paths taken from the workspace root (none without one)."""
    if root is None:
        return request

    def from_root(path: Path) -> Path:
        return located(path, root)

    secrets_file = request.secrets_file
    if secrets_file is not None and secrets_file != STDIN:
        secrets_file = str(from_root(Path(secrets_file)))
    return replace(
        request,
        output=from_root(request.output),
        dataset_file=None if request.dataset_file is None else from_root(request.dataset_file),
        secrets_file=secrets_file,
    )


def kept_results(
    done: Mapping[ItemKey, ItemResult], *, retry_failed: bool
) -> dict[ItemKey, ItemResult]:
    """The journaled results a run keeps: all of them; with `--retry-failed`, not the failed
    and skipped ones (those run again)."""
    return {
        key: result
        for key, result in done.items()
        if not (retry_failed and result.status in ("failed", "skipped"))
    }


def pending_count(plan: EvalPlan) -> int:
    """How many work items the plan would run if it started now (its folder only read)."""
    request = plan.request
    if request.fresh:
        return len(plan.items)
    try:
        done = Journal.load(request.output / plan.run_name / EVENTS_FILE, on_warning=_quiet)
    except (OSError, EvalError):
        return len(plan.items)  # the run itself will say what is wrong with the folder
    kept = kept_results(done, retry_failed=request.retry_failed)
    return sum(1 for item in plan.items if item.key not in kept)


def _quiet(_message: str) -> None:
    """A torn journal is repaired, and reported, by the run itself."""


def _rollout_source(
    request: EvalRequest, config: EvalConfig | None, mode: ServerMode
) -> tuple[str, str]:
    """The manifest's rollout `entrypoint` and `source_digest` (EVAL.md §8).

    A config's rollout folder is digested as the official tool digests it, launched or not
    (with `--server` the config still says which rollout the server runs); the demo's code is
    server_stub's; servers given by URL alone have no code here to digest.
    """
    if config is not None:
        source, entrypoint = config.rollout_dir(), config.entrypoint
    elif mode == "embedded":
        from core.eval.servers.embedded import DEMO_ROLLOUT_ENTRYPOINT, demo_rollout_source

        source, entrypoint = demo_rollout_source(), DEMO_ROLLOUT_ENTRYPOINT
    else:
        return EXTERNAL_ENTRYPOINT, EMPTY_SOURCE_DIGEST
    output, root = request.output.resolve(), source.resolve()
    if output == root:
        raise InputError.single(
            "--output",
            f"{request.output} is the rollout folder itself; the results would be part of "
            "the code they describe",
        )
    inside = output if output.is_relative_to(root) else None
    try:
        digest = rollout_source_digest(root, exclude=inside)
    except (OSError, ValueError) as exc:
        message = describe_os_error(exc) if isinstance(exc, OSError) else str(exc)
        where = str(config.path) if config is not None else str(root)
        key = "experiment.rollout" if config is not None else None
        raise InputError.single(
            where, f"cannot digest the rollout's source: {message}", key=key
        ) from exc
    return entrypoint, digest


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
                    f"no dataset file {config.default_dataset_pattern()}; put the rows there, "
                    "or give --dataset-file PATH",
                )
            )
            return None
        return near(path)
    if request.servers or request.servers_file is not None:
        problems.append(
            InputProblem(
                "--dataset-file", None, None, "give --dataset-file with --server or --servers-file"
            )
        )
        return None
    if problems:
        return None  # bad input writes nothing, not even the demo's rows
    # The zero-setup demo: the bundled dataset, written where the run's results go. Imported
    # here: only the demo needs the embedded server stack.
    from core.eval.servers.embedded import refresh_demo_dataset

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
