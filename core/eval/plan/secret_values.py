"""The values of a config's `[secrets] required` names (EVAL.md §2): `--secrets-file`, then the
environment.

`--secrets-file PATH` (or `-` for standard input) holds dotenv lines, `NAME=value`: blank lines
and `#` comments are skipped, an `export ` prefix is allowed, one pair of matching quotes
around the value is removed, and a value never spans lines. A problem names the line, never
its content, which may be a secret.

The values are never written anywhere. The plan holds them (out of its repr); for the run they
are put in this process's environment (`secrets_in_environment`), where the launched rollout
server inherits them and LiteLLM finds provider keys, and the run's redactor masks them in
everything it writes or prints.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from core.eval.errors import InputError, InputProblem

#: `--secrets-file -`: the lines come from standard input.
STDIN = "-"
FLAG = "--secrets-file"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXPORT = "export "
_QUOTES = ("'", '"')


def read_secrets_file(spec: str, *, stdin: TextIO | None = None) -> dict[str, str]:
    """The `NAME=value` pairs of `--secrets-file spec` (`-`: `stdin`, default `sys.stdin`);
    `InputError` naming the file and each bad line."""
    if spec == STDIN:
        source = "<stdin>"
        text = (stdin or sys.stdin).read()
    else:
        source = spec
        try:
            text = Path(spec).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError.single(source, "secrets file not found", key=FLAG) from None
        except IsADirectoryError:
            message = "is a directory, not a secrets file"
            raise InputError.single(source, message, key=FLAG) from None
        except UnicodeDecodeError:
            raise InputError.single(source, "not valid UTF-8", key=FLAG) from None
        except OSError as exc:
            message = f"cannot read the secrets file: {exc.strerror}"
            raise InputError.single(source, message, key=FLAG) from None
    return parse_dotenv(text, source)


def parse_dotenv(text: str, source: str) -> dict[str, str]:
    """The pairs of dotenv `text`; the last of a repeated name wins."""
    values: dict[str, str] = {}
    problems: list[InputProblem] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(_EXPORT):
            line = line[len(_EXPORT) :].lstrip()
        name, equals, value = line.partition("=")
        name, value = name.strip(), value.strip()
        problem: str | None = None
        if not equals:
            problem = "expected NAME=value (the line is not shown: it may hold a secret)"
        elif not _NAME.fullmatch(name):
            problem = "the name before '=' must be letters, digits and _, not starting with a digit"
        elif value[:1] in _QUOTES:
            if len(value) < 2 or value[-1] != value[0]:
                problem = "the value's quote is not closed on its line (values are one line)"
            else:
                value = value[1:-1]
        if problem is None:
            values[name] = value
        else:
            problems.append(InputProblem(source, number, FLAG, problem))
    if problems:
        raise InputError(problems)
    return values


def available_values(
    from_file: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """What a `[secrets]` name may take: the file's value, else the environment's (`environ`,
    default `os.environ`); empty values count as none."""
    environment = os.environ if environ is None else environ
    merged = {name: value for name, value in environment.items() if value}
    merged.update((name, value) for name, value in from_file.items() if value)
    return merged


@contextmanager
def secrets_in_environment(values: Mapping[str, str]) -> Iterator[None]:
    """This process's environment with `values` set, for the block; restored afterwards."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
