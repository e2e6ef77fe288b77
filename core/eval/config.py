"""The Osmosis eval config (EVAL.md §2): read, validate, and point every problem at its line.

Validation collects every problem before raising, so one run of `osmosis-tui eval CONFIG`
shows all of them. `tomllib` reports no positions for the values it returns, so
`TomlKeyLocator` scans the text itself to map a key path back to the line that defines it.

The schema is EVAL.md §2 plus the keys the official `osmosis` CLI accepts in the same file
(`experiment.branch`, `experiment.commit_sha`, an `[advanced]` table): they only matter when a
run is submitted to the platform, so they are accepted and ignored here rather than making
users keep two copies of a config.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from core.eval.errors import InputError, InputProblem, quote_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML through the tomli backport
    import tomli as tomllib

KeyPath = tuple[str | int, ...]
"""A key path inside the document; ints index into arrays (`secrets.required[1]`)."""

# The official CLI's rules for names in [env] and [secrets]; a config that passes here should
# pass `osmosis eval submit` too.
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
_SECRET_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
# The launcher sets these for the rollout server (EVAL.md §5); [env] must not override them.
_RESERVED_ENV_PREFIX = "_OSMOSIS_"
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_BARE_VALUE = re.compile(r"[^,\]}#\n]*")  # numbers, booleans, dates: up to what ends them

_SECTIONS = ("experiment", "evaluation", "env", "secrets")
_PLATFORM_ONLY_SECTIONS = ("advanced",)
_EXPERIMENT_REQUIRED = ("rollout", "entrypoint", "model_path", "dataset")
_EXPERIMENT_PLATFORM_ONLY = ("branch", "commit_sha")


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

    def rollout_dir(self) -> Path:
        return self.workspace / "rollouts" / self.rollout

    def entrypoint_path(self) -> Path:
        """`<workspace>/rollouts/<rollout>/<entrypoint>`; validation keeps it inside."""
        return self.rollout_dir() / self.entrypoint

    def default_dataset_path(self) -> Path | None:
        """`<workspace>/data/<dataset>.jsonl`, else `.csv`, whichever exists first.

        `experiment.dataset` is a platform dataset name, not a path; a name that would reach
        outside `data/` has no local default and gives None, like a missing file.
        """
        if _path_escape_problem(self.dataset) is not None:
            return None
        data_dir = self.workspace / "data"
        for suffix in (".jsonl", ".csv"):
            candidate = data_dir / f"{self.dataset}{suffix}"
            if candidate.is_file():
                return candidate
        return None


def load_config(path: Path, *, environ: Mapping[str, str] | None = None) -> EvalConfig:
    """Read and validate the eval config at `path`; raise `InputError` listing every problem.

    `environ` (default: `os.environ`) is where `[secrets].required` names must be set.
    """
    source = str(path)
    text = _read_text(path, source)
    document = _parse_toml(text, source)
    report = _Report(source, TomlKeyLocator(text))
    config = _validate(document, report, path, os.environ if environ is None else environ)
    if report.problems or config is None:
        raise InputError(report.sorted_problems())
    return config


# --------------------------------------------------------------------------------------------
# Reading and parsing


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


_TOML_POSITION = re.compile(r"\s*\((?:at line (\d+), column (\d+)|at end of document)\)\s*$")


def _parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError([_syntax_problem(str(exc), text, source)]) from None
    except ValueError as exc:
        # Not a TOMLDecodeError, so no position: e.g. an integer too long for int().
        raise InputError.single(source, f"invalid TOML: {exc}") from None


def _syntax_problem(error: str, text: str, source: str) -> InputProblem:
    """Turn tomllib's "Invalid value (at line 3, column 9)" into file:line + message."""
    match = _TOML_POSITION.search(error)
    if match is None:
        return InputProblem(source, None, None, f"invalid TOML: {error}")
    reason = error[: match.start()]
    if match.group(1) is None:
        # "at end of document": the last line is where the reader gave up.
        last_line = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        return InputProblem(source, max(last_line, 1), None, f"invalid TOML: {reason}")
    line, column = int(match.group(1)), int(match.group(2))
    return InputProblem(source, line, None, f"invalid TOML at column {column}: {reason}")


# --------------------------------------------------------------------------------------------
# Locating keys


class TomlKeyLocator:
    """Maps a TOML key path to the 1-based line that defines it.

    Knows table headers (`[a.b]`, `[[a]]`), `key = value` lines, dotted and quoted keys, keys
    inside inline tables, and skips over multi-line strings and arrays so their contents are
    never mistaken for keys. Only meant for text that `tomllib` has already accepted; on
    anything it does not understand it moves on to the next line instead of failing.
    """

    def __init__(self, text: str) -> None:
        self._lines: dict[tuple[str, ...], int] = {}
        _KeyScanner(text, self._lines).run()

    def __contains__(self, path: object) -> bool:
        """Whether `path` (a tuple of keys) is defined itself, not just through an ancestor."""
        return path in self._lines

    def line_of(self, path: Sequence[str | int]) -> int | None:
        """The line of `path`, else of its nearest defined ancestor (its table), else None.

        Array indices in `path` are ignored: an array element is located at its array's key.
        """
        keys: list[str] = []
        for part in path:
            if isinstance(part, int):
                break
            keys.append(part)
        for end in range(len(keys), 0, -1):
            line = self._lines.get(tuple(keys[:end]))
            if line is not None:
                return line
        return None


_ESCAPES = {
    "b": "\b",
    "t": "\t",
    "n": "\n",
    "f": "\f",
    "r": "\r",
    '"': '"',
    "\\": "\\",
    "e": "\x1b",
}
_HEX_ESCAPE_LENGTHS = {"x": 2, "u": 4, "U": 8}


class _KeyScanner:
    """A forgiving single-pass scanner behind `TomlKeyLocator`."""

    def __init__(self, text: str, found: dict[tuple[str, ...], int]) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.found = found

    def run(self) -> None:
        table: tuple[str, ...] = ()
        while True:
            self._skip_space(newlines=True)
            if self.pos >= len(self.text):
                return
            start_line = self.line
            if self._peek() == "[":
                header = self._header()
                if header is not None:
                    table = header
                    self._record(header, start_line)
            else:
                key = self._key()
                if key is not None and self._take("="):
                    self._record(table + key, start_line)
                    self._skip_value(table + key)
            self._skip_rest_of_line()

    # -- movement

    def _peek(self) -> str:
        return self._char_at(self.pos)

    def _char_at(self, index: int) -> str:
        return self.text[index] if index < len(self.text) else ""

    def _move_to(self, new_pos: int) -> None:
        new_pos = min(new_pos, len(self.text))
        self.line += self.text.count("\n", self.pos, new_pos)
        self.pos = new_pos

    def _take(self, token: str) -> bool:
        self._skip_space(newlines=False)
        if self.text.startswith(token, self.pos):
            self._move_to(self.pos + len(token))
            return True
        return False

    def _skip_space(self, *, newlines: bool) -> None:
        """Skip blanks and comments (and, when `newlines`, line breaks too)."""
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in " \t" or (newlines and char in "\r\n"):
                self._move_to(self.pos + 1)
            elif char == "#":
                end = self.text.find("\n", self.pos)
                self._move_to(len(self.text) if end < 0 else end)
            else:
                return

    def _skip_rest_of_line(self) -> None:
        end = self.text.find("\n", self.pos)
        self._move_to(len(self.text) if end < 0 else end + 1)

    def _record(self, path: tuple[str, ...], line: int) -> None:
        # `[a.b]` and `a.b = 1` also define `a` when nothing did before.
        for end in range(1, len(path) + 1):
            self.found.setdefault(path[:end], line)

    # -- keys

    def _header(self) -> tuple[str, ...] | None:
        closing = "]]" if self.text.startswith("[[", self.pos) else "]"
        self._move_to(self.pos + len(closing))
        key = self._key()
        if key is None or not self._take(closing):
            return None
        return key

    def _key(self) -> tuple[str, ...] | None:
        parts: list[str] = []
        while True:
            self._skip_space(newlines=False)
            part = self._key_part()
            if part is None:
                return None
            parts.append(part)
            self._skip_space(newlines=False)
            if self._peek() != ".":
                return tuple(parts)
            self._move_to(self.pos + 1)

    def _key_part(self) -> str | None:
        char = self._peek()
        if char == '"':
            return self._basic_string()
        if char == "'":
            return self._literal_string()
        match = _BARE_KEY.match(self.text, self.pos)
        if match is None:
            return None
        self._move_to(match.end())
        return match.group()

    def _basic_string(self) -> str | None:
        """A one-line "..." string with its escapes decoded; None if unterminated."""
        chars: list[str] = []
        index = self.pos + 1
        while index < len(self.text) and self.text[index] != "\n":
            char = self.text[index]
            if char == '"':
                self._move_to(index + 1)
                return "".join(chars)
            if char == "\\":
                decoded, index = self._escape(index)
                chars.append(decoded)
                continue
            chars.append(char)
            index += 1
        self._move_to(index)
        return None

    def _escape(self, index: int) -> tuple[str, int]:
        """Decode the escape at `text[index]` (a backslash); return it and the next index."""
        kind = self.text[index + 1 : index + 2]
        if kind in _ESCAPES:
            return _ESCAPES[kind], index + 2
        length = _HEX_ESCAPE_LENGTHS.get(kind)
        if length is not None:
            digits = self.text[index + 2 : index + 2 + length]
            try:
                return chr(int(digits, 16)), index + 2 + length
            except ValueError:
                pass
        return self.text[index : index + 2], index + 2

    def _literal_string(self) -> str | None:
        end = self.text.find("'", self.pos + 1)
        newline = self.text.find("\n", self.pos + 1)
        if end < 0 or 0 <= newline < end:
            self._move_to(len(self.text) if newline < 0 else newline)
            return None
        value = self.text[self.pos + 1 : end]
        self._move_to(end + 1)
        return value

    # -- values

    def _skip_value(self, path: tuple[str, ...] | None) -> None:
        """Move past one value; record the keys of inline tables under `path`."""
        self._skip_space(newlines=False)
        if self.text.startswith('"""', self.pos):
            self._skip_multiline_string('"""', escapes=True)
        elif self.text.startswith("'''", self.pos):
            self._skip_multiline_string("'''", escapes=False)
        elif self._peek() == '"':
            self._basic_string()
        elif self._peek() == "'":
            self._literal_string()
        elif self._peek() == "[":
            self._skip_array()
        elif self._peek() == "{":
            self._skip_inline_table(path)
        else:
            match = _BARE_VALUE.match(self.text, self.pos)
            self._move_to(match.end() if match else self.pos)

    def _skip_multiline_string(self, delimiter: str, *, escapes: bool) -> None:
        index = self.pos + 3
        while index < len(self.text):
            if escapes and self.text[index] == "\\":
                index += 2
            elif self.text.startswith(delimiter, index):
                # Up to two quotes right before the delimiter belong to the content.
                run = 3
                while run < 5 and self._char_at(index + run) == delimiter[0]:
                    run += 1
                self._move_to(index + run)
                return
            else:
                index += 1
        self._move_to(len(self.text))

    def _skip_array(self) -> None:
        self._move_to(self.pos + 1)
        while self.pos < len(self.text):
            self._skip_space(newlines=True)
            char = self._peek()
            if char == "]":
                self._move_to(self.pos + 1)
                return
            if char in ",}":
                self._move_to(self.pos + 1)
                continue
            before = self.pos
            self._skip_value(None)  # array elements have no key path of their own
            if self.pos == before:
                self._move_to(self.pos + 1)

    def _skip_inline_table(self, path: tuple[str, ...] | None) -> None:
        self._move_to(self.pos + 1)
        while self.pos < len(self.text):
            self._skip_space(newlines=True)
            char = self._peek()
            if char == "}":
                self._move_to(self.pos + 1)
                return
            if char == ",":
                self._move_to(self.pos + 1)
                continue
            line = self.line
            key = self._key()
            if key is None or not self._take("="):
                self._move_to(self.pos + 1)
                continue
            inner = None if path is None else path + key
            if inner is not None:
                self._record(inner, line)
            self._skip_value(inner)


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


def format_key_path(path: KeyPath) -> str:
    """`("evaluation", "limit")` → `evaluation.limit`; odd keys quoted, indices as `[i]`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        shown = part if _BARE_KEY.fullmatch(part) else quote_text(part)
        text = shown if not text else f"{text}.{shown}"
    return text


def _describe(value: object) -> str:
    """A TOML value as the user would recognise it in an error message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return quote_text(value)
    if isinstance(value, int) and value.bit_length() > 64:
        # tomllib accepts integers of any size; repr() of a huge one can even raise.
        return "an integer outside the 64-bit range"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, (datetime, date, time)):
        return f"a date/time ({value.isoformat()})"
    return type(value).__name__  # pragma: no cover - tomllib returns nothing else


def _validate(
    document: dict[str, Any], report: _Report, path: Path, environ: Mapping[str, str]
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
    secrets = _check_secrets(document, report, env, environ)
    if experiment is None or report.problems:
        return None
    return EvalConfig(
        path=path,
        workspace=_workspace_of(path),
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
    )


def _workspace_of(path: Path) -> Path:
    """The folder holding `configs/` when the config lives there, else the config's folder."""
    folder = path.resolve().parent
    return folder.parent if folder.name == "configs" else folder


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
    report.add(path, f"expected a table, got {_describe(value)}")
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
            report.add(("experiment", key), f"expected a string, got {_describe(table[key])}")
    _check_rollout_paths(report, values)
    return values if len(values) == len(_EXPERIMENT_REQUIRED) else None


_EXPERIMENT_HINTS = {
    "rollout": "the folder name under rollouts/",
    "entrypoint": "the file inside rollouts/<rollout>/ that serves the rollout",
    "model_path": "the model to evaluate",
    "dataset": "the dataset name; locally data/<dataset>.jsonl",
}


def _required_string(report: _Report, table: Mapping[str, object], key: str) -> str | None:
    path = ("experiment", key)
    if key not in table:
        report.add(path, f"missing required key ({_EXPERIMENT_HINTS[key]})")
        return None
    value = table[key]
    if not isinstance(value, str):
        report.add(path, f"expected a string, got {_describe(value)}")
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
            report.add(("experiment", "rollout"), f"{problem}, got {_describe(rollout)}")
            del values["rollout"]
    entrypoint = values.get("entrypoint")
    if entrypoint is not None:
        problem = _path_escape_problem(entrypoint)
        if problem is not None:
            report.add(("experiment", "entrypoint"), f"{problem}, got {_describe(entrypoint)}")
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
        return f"expected an integer, got {_describe(value)}"
    return None if value >= 1 else f"must be at least 1, got {_describe(value)}"


def _number(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected a number, got {_describe(value)}"
    return None if math.isfinite(value) else f"must be a finite number, got {value!r}"


def _positive_number(value: object) -> str | None:
    problem = _number(value)
    if problem is None and isinstance(value, (int, float)) and value <= 0:
        return f"must be greater than 0, got {_describe(value)}"
    return problem


_EVALUATION_CHECKS: dict[str, Callable[[object], str | None]] = {
    "limit": _count,
    "n": _count,
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
            report.add(path, f"expected a string, got {_describe(value)}")
        elif not _ENV_NAME.fullmatch(name):
            report.add(path, "not a valid variable name (A-Z, 0-9 and _, not starting with 0-9)")
        elif name.startswith(_RESERVED_ENV_PREFIX):
            report.add(path, f"names starting with {_RESERVED_ENV_PREFIX} are reserved")
        else:
            env[name] = value
    return env


def _check_secrets(
    document: dict[str, Any], report: _Report, env: Mapping[str, str], environ: Mapping[str, str]
) -> tuple[str, ...]:
    table = _section(document, report, "secrets")
    _report_unknown_keys(report, "secrets", table, ("required",))
    names = list(_secret_names(report, table.get("required", [])))
    for name in names:
        path = ("secrets", "required")
        if name in env:
            report.add(path, f"{name} is also set in [env]; a variable must come from one place")
        elif name not in environ:
            report.add(path, f"environment variable {name} is not set")
        elif not environ[name]:
            report.add(path, f"environment variable {name} is empty")
    return tuple(names)


def _secret_names(report: _Report, value: object) -> Iterator[str]:
    """The valid, distinct names in `[secrets].required`, reporting the rest."""
    if not isinstance(value, list):
        report.add(("secrets", "required"), f"expected an array of names, got {_describe(value)}")
        return
    seen: set[str] = set()
    for index, name in enumerate(value):
        path = ("secrets", "required", index)
        if not isinstance(name, str):
            report.add(path, f"expected a string, got {_describe(name)}")
        elif not _SECRET_NAME.fullmatch(name):
            report.add(
                path,
                f"not a valid secret name (A-Z, 0-9 and _, starting with A-Z), "
                f"got {_describe(name)}",
            )
        elif name in seen:
            report.add(path, f"{name} is listed twice")
        else:
            seen.add(name)
            yield name
