"""The Osmosis eval config (EVAL.md §2): read, validate, and point every problem at its line.

Validation collects every problem before raising, so one run of `osmosis-tui eval CONFIG`
shows all of them, each at its line (found by `core.eval.plan.toml_source`).

The schema is EVAL.md §2 plus the keys the official `osmosis` CLI accepts in the same file
(`experiment.branch`, `experiment.commit_sha`, an `[advanced]` table): they only matter when a
run is submitted to the platform, so they are accepted here rather than making users keep two
copies of a config, and only recorded in the run's provenance, as the official tool does.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from core.eval.errors import InputError, InputProblem
from core.eval.plan.toml_source import (
    KeyPath,
    TomlKeyLocator,
    describe_value,
    format_key_path,
    parse_toml,
)
from core.eval.results.records import MAX_WORK_ITEMS
from core.eval.untrusted_json import TOO_DEEP, too_deep

# The official CLI's rules for names in [env] and [secrets]; a config that passes here should
# pass `osmosis eval submit` too.
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
_SECRET_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
# The launcher sets these for the rollout server (EVAL.md §5); [env] must not override them.
_RESERVED_ENV_PREFIX = "_OSMOSIS_"

_SECTIONS = ("experiment", "evaluation", "env", "secrets")
_PLATFORM_ONLY_SECTIONS = ("advanced",)
_EXPERIMENT_REQUIRED = ("rollout", "entrypoint", "model_path", "dataset")
_EXPERIMENT_PLATFORM_ONLY = ("branch", "commit_sha")
# The files `data/<experiment.dataset>` may be, in the order they are looked for.
DATASET_SUFFIXES = (".jsonl", ".csv", ".parquet")


@dataclass(frozen=True)
class EvalConfig:
    """A validated eval config."""

    path: Path
    """The config file as given."""
    workspace: Path
    """Absolute folder holding `configs/`, `rollouts/` and `data/`."""
    rollout: str
    entrypoint: str
    model_path: str
    dataset: str
    limit: int | None = None
    n: int | None = None
    batch_size: int | None = None
    pass_threshold: float | None = None
    agent_timeout_sec: float | None = None
    grader_timeout_sec: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    required_secrets: tuple[str, ...] = ()
    branch: str | None = None
    """`experiment.branch`: not used locally, recorded in the run's provenance."""
    commit_sha: str | None = None
    """`experiment.commit_sha`: not used locally, recorded in the run's provenance."""
    advanced: dict[str, Any] = field(default_factory=dict)
    """The `[advanced]` table: not used locally, recorded in the run's provenance."""

    def rollout_dir(self) -> Path:
        return self.workspace / "rollouts" / self.rollout

    def entrypoint_path(self) -> Path:
        """`<workspace>/rollouts/<rollout>/<entrypoint>`; validation keeps it inside."""
        return self.rollout_dir() / self.entrypoint

    def default_dataset_path(self) -> Path | None:
        """`<workspace>/data/<dataset>.jsonl`, else `.csv`, else `.parquet`, whichever exists
        first (EVAL.md §1).

        `experiment.dataset` is a platform dataset name, not a path; a name that would reach
        outside `data/` has no local default and gives None, like a missing file.
        """
        if _path_escape_problem(self.dataset) is not None:
            return None
        data_dir = self.workspace / "data"
        for suffix in DATASET_SUFFIXES:
            candidate = data_dir / f"{self.dataset}{suffix}"
            if candidate.is_file():
                return candidate
        return None

    def default_dataset_pattern(self) -> str:
        """Where `default_dataset_path` looks, for the message when nothing is there."""
        suffixes = ",".join(suffix.lstrip(".") for suffix in DATASET_SUFFIXES)
        return f"{self.workspace / 'data' / self.dataset}.{{{suffixes}}}"


def load_config(path: Path, *, secret_values: Mapping[str, str] | None = None) -> EvalConfig:
    """Read and validate the eval config at `path`; raise `InputError` listing every problem.

    `secret_values` (default: `os.environ`) are the values the `[secrets].required` names may
    take; each name needs a non-empty one (`core.eval.plan.secret_values` gathers them from
    `--secrets-file` and the environment).
    """
    source = str(path)
    text = _read_text(path, source)
    document = parse_toml(text, source)
    report = _Report(source, TomlKeyLocator(text))
    _check_nesting(document, report)
    values = os.environ if secret_values is None else secret_values
    config = _validate(document, report, path, values)
    if report.problems or config is None:
        raise InputError(report.sorted_problems())
    return config


# --------------------------------------------------------------------------------------------
# Reading


def _read_text(path: Path, source: str) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError.single(source, "config file not found") from None
    except IsADirectoryError:
        raise InputError.single(source, "is a directory, not a config file") from None
    except OSError as exc:
        raise InputError.single(source, f"cannot read the config file: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        message = f"not valid UTF-8 (byte 0x{data[exc.start]:02x}); TOML files must be UTF-8"
        raise InputError.single(source, message, line=line) from None
    # Editors on Windows like to start files with a byte order mark; TOML forbids it.
    return text.removeprefix("\ufeff")


# --------------------------------------------------------------------------------------------
# Validation


class _Report:
    """Collects problems, turning key paths into lines and printable keys."""

    def __init__(self, source: str, locator: TomlKeyLocator) -> None:
        self.source = source
        self.locator = locator
        self.problems: list[InputProblem] = []

    def add(self, path: KeyPath, message: str) -> None:
        line = self.locator.line_of(path)
        self.problems.append(InputProblem(self.source, line, format_key_path(path), message))

    def sorted_problems(self) -> list[InputProblem]:
        # In file order, so the listing reads top to bottom; line-less ones (a missing
        # section) first. sorted() is stable: several problems on one line keep their order.
        return sorted(self.problems, key=lambda p: (p.line is not None, p.line or 0))


def _check_nesting(document: dict[str, Any], report: _Report) -> None:
    """Each section's values nest at most `MAX_NESTING` levels (the section counts as one):
    an `[advanced]` table is written into the run's manifest, whose writer recurses. A table
    header parses at any depth, so this is the check that stops `[a.a.a....]`."""
    for name, value in document.items():
        path = too_deep(value)
        if path is not None:
            report.add((name, *path[:1]), TOO_DEEP)


def _validate(
    document: dict[str, Any], report: _Report, path: Path, secret_values: Mapping[str, str]
) -> EvalConfig | None:
    for name, value in document.items():
        if name in _PLATFORM_ONLY_SECTIONS:
            _expect_table(report, (name,), value)
        elif name not in _SECTIONS:
            what = "section" if isinstance(value, dict) else "top-level key"
            report.add((name,), f"unknown {what}; expected {_one_of(_SECTIONS, brackets=True)}")

    experiment = _check_experiment(document, report)
    evaluation = _check_evaluation(document, report)
    env = _check_env(document, report)
    secrets = _check_secrets(document, report, env, secret_values)
    if experiment is None or report.problems:
        return None
    return EvalConfig(
        path=path,
        workspace=workspace_root(path),
        rollout=experiment["rollout"],
        entrypoint=experiment["entrypoint"],
        model_path=experiment["model_path"],
        dataset=experiment["dataset"],
        limit=_as_int(evaluation.get("limit")),
        n=_as_int(evaluation.get("n")),
        batch_size=_as_int(evaluation.get("batch_size")),
        pass_threshold=_as_float(evaluation.get("pass_threshold")),
        agent_timeout_sec=_as_float(evaluation.get("agent_workflow_timeout_s")),
        grader_timeout_sec=_as_float(evaluation.get("grader_timeout_s")),
        env=env,
        required_secrets=secrets,
        branch=_optional_string(document["experiment"], "branch"),
        commit_sha=_optional_string(document["experiment"], "commit_sha"),
        advanced=dict(document.get("advanced") or {}),
    )


def workspace_root(config_path: Path) -> Path:
    """The workspace a config belongs to (EVAL.md §1), absolute: the nearest folder at or above
    the config's that holds both `rollouts/` and `configs/` (the official layout keeps the
    config in `configs/eval/`, but one anywhere inside the workspace works). A config outside
    any workspace: the folder holding its `configs/` folder, else its own folder."""
    folder = config_path.resolve().parent
    workspace = enclosing_workspace(folder)
    if workspace is not None:
        return workspace
    return folder.parent if folder.name == "configs" else folder


def enclosing_workspace(folder: Path) -> Path | None:
    """The workspace `folder` is in (absolute): the nearest folder at or above it that holds
    both `rollouts/` and `configs/`; None outside any."""
    folder = folder.resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / "rollouts").is_dir() and (candidate / "configs").is_dir():
            return candidate
    return None


def _optional_string(table: Mapping[str, object], key: str) -> str | None:
    value = table.get(key)
    return value if isinstance(value, str) and value else None


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _as_float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _one_of(names: Sequence[str], *, brackets: bool = False) -> str:
    shown = [f"[{name}]" if brackets else name for name in names]
    return "one of " + ", ".join(shown)


def _expect_table(report: _Report, path: KeyPath, value: object) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    report.add(path, f"expected a table, got {describe_value(value)}")
    return None


def _section(document: dict[str, Any], report: _Report, name: str) -> dict[str, Any]:
    """The section's table; {} when absent or not a table (the latter reported)."""
    if name not in document:
        return {}
    return _expect_table(report, (name,), document[name]) or {}


def _report_unknown_keys(
    report: _Report, section: str, table: Mapping[str, object], known: Sequence[str]
) -> None:
    for key in table:
        if key not in known:
            report.add((section, key), f"unknown key; expected {_one_of(known)}")


# -- [experiment]


def _check_experiment(document: dict[str, Any], report: _Report) -> dict[str, str] | None:
    if "experiment" not in document:
        report.add(("experiment",), "missing required section [experiment]")
        return None
    table = _expect_table(report, ("experiment",), document["experiment"])
    if table is None:
        return None
    _report_unknown_keys(
        report, "experiment", table, _EXPERIMENT_REQUIRED + _EXPERIMENT_PLATFORM_ONLY
    )
    values: dict[str, str] = {}
    for key in _EXPERIMENT_REQUIRED:
        value = _required_string(report, table, key)
        if value is not None:
            values[key] = value
    for key in _EXPERIMENT_PLATFORM_ONLY:
        if key in table and not isinstance(table[key], str):
            report.add(("experiment", key), f"expected a string, got {describe_value(table[key])}")
    _check_rollout_paths(report, values)
    return values if len(values) == len(_EXPERIMENT_REQUIRED) else None


_EXPERIMENT_HINTS = {
    "rollout": "the folder name under rollouts/",
    "entrypoint": "the file inside rollouts/<rollout>/ that serves the rollout",
    "model_path": "the model to evaluate",
    "dataset": "the dataset name; locally data/<dataset>.jsonl, .csv or .parquet",
}


def _required_string(report: _Report, table: Mapping[str, object], key: str) -> str | None:
    path = ("experiment", key)
    if key not in table:
        report.add(path, f"missing required key ({_EXPERIMENT_HINTS[key]})")
        return None
    value = table[key]
    if not isinstance(value, str):
        report.add(path, f"expected a string, got {describe_value(value)}")
        return None
    if not value.strip():
        report.add(path, f"must not be empty ({_EXPERIMENT_HINTS[key]})")
        return None
    return value


def _check_rollout_paths(report: _Report, values: dict[str, str]) -> None:
    """The launcher runs `rollouts/<rollout>/<entrypoint>`: it must not leave that folder."""
    rollout = values.get("rollout")
    if rollout is not None:
        problem = _path_escape_problem(rollout)
        if problem is None and ("/" in rollout or "\\" in rollout):
            problem = "must be a single folder name under rollouts/, without path separators"
        if problem is not None:
            report.add(("experiment", "rollout"), f"{problem}, got {describe_value(rollout)}")
            del values["rollout"]
    entrypoint = values.get("entrypoint")
    if entrypoint is not None:
        problem = _path_escape_problem(entrypoint)
        if problem is not None:
            report.add(("experiment", "entrypoint"), f"{problem}, got {describe_value(entrypoint)}")
            del values["entrypoint"]


def _path_escape_problem(value: str) -> str | None:
    """Why `value` is not a relative path that stays inside the folder it is joined to."""
    if "\0" in value:
        return "must not contain NUL characters"
    # Both flavours: a config written on Windows may say C:\..., and a backslash is a
    # separator there even though it is an ordinary character on POSIX.
    if PurePosixPath(value).is_absolute() or PureWindowsPath(value).anchor:
        return "must be a relative path, not an absolute one"
    parts = [part for part in re.split(r"[\\/]", value) if part not in ("", ".")]
    if ".." in parts:
        return "must not contain '..'"
    if not parts:
        return "must name something inside its folder"
    return None


# -- [evaluation]


def _count(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an integer, got {describe_value(value)}"
    return None if value >= 1 else f"must be at least 1, got {describe_value(value)}"


def _attempts(value: object) -> str | None:
    """`n`: a count, and one a run can hold with a single row (the product of rows and n is
    checked once the rows are known)."""
    problem = _count(value)
    if problem is None and isinstance(value, int) and value > MAX_WORK_ITEMS:
        return (
            f"at most {MAX_WORK_ITEMS:,} (the most work items a run holds), "
            f"got {describe_value(value)}"
        )
    return problem


def _number(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected a number, got {describe_value(value)}"
    return None if math.isfinite(value) else f"must be a finite number, got {value!r}"


def _positive_number(value: object) -> str | None:
    problem = _number(value)
    if problem is None and isinstance(value, (int, float)) and value <= 0:
        return f"must be greater than 0, got {describe_value(value)}"
    return problem


_EVALUATION_CHECKS: dict[str, Callable[[object], str | None]] = {
    "limit": _count,
    "n": _attempts,
    "batch_size": _count,
    "pass_threshold": _number,
    "agent_workflow_timeout_s": _positive_number,
    "grader_timeout_s": _positive_number,
}


def _check_evaluation(document: dict[str, Any], report: _Report) -> dict[str, object]:
    table = _section(document, report, "evaluation")
    _report_unknown_keys(report, "evaluation", table, tuple(_EVALUATION_CHECKS))
    valid: dict[str, object] = {}
    for key, check in _EVALUATION_CHECKS.items():
        if key not in table:
            continue
        problem = check(table[key])
        if problem is None:
            valid[key] = table[key]
        else:
            report.add(("evaluation", key), problem)
    return valid


# -- [env] and [secrets]


def _check_env(document: dict[str, Any], report: _Report) -> dict[str, str]:
    env: dict[str, str] = {}
    for name, value in _section(document, report, "env").items():
        path = ("env", name)
        if not isinstance(value, str):
            report.add(path, f"expected a string, got {describe_value(value)}")
        elif not _ENV_NAME.fullmatch(name):
            report.add(path, "not a valid variable name (A-Z, 0-9 and _, not starting with 0-9)")
        elif name.startswith(_RESERVED_ENV_PREFIX):
            report.add(path, f"names starting with {_RESERVED_ENV_PREFIX} are reserved")
        else:
            env[name] = value
    return env


def _check_secrets(
    document: dict[str, Any],
    report: _Report,
    env: Mapping[str, str],
    secret_values: Mapping[str, str],
) -> tuple[str, ...]:
    table = _section(document, report, "secrets")
    _report_unknown_keys(report, "secrets", table, ("required",))
    names = list(_secret_names(report, table.get("required", [])))
    for name in names:
        path = ("secrets", "required")
        if name in env:
            report.add(path, f"{name} is also set in [env]; a variable must come from one place")
        elif not secret_values.get(name):
            report.add(
                path,
                f"no value for {name}: give it in a --secrets-file (NAME=value lines), or set "
                f"the environment variable {name}",
            )
    return tuple(names)


def _secret_names(report: _Report, value: object) -> Iterator[str]:
    """The valid, distinct names in `[secrets].required`, reporting the rest."""
    if not isinstance(value, list):
        report.add(
            ("secrets", "required"), f"expected an array of names, got {describe_value(value)}"
        )
        return
    seen: set[str] = set()
    for index, name in enumerate(value):
        path = ("secrets", "required", index)
        if not isinstance(name, str):
            report.add(path, f"expected a string, got {describe_value(name)}")
        elif not _SECRET_NAME.fullmatch(name):
            report.add(
                path,
                f"not a valid secret name (A-Z, 0-9 and _, starting with A-Z), "
                f"got {describe_value(name)}",
            )
        elif name in seen:
            report.add(path, f"{name} is listed twice")
        else:
            seen.add(name)
            yield name
