"""`--secrets-file`: dotenv lines for the `[secrets]` names (EVAL.md §2), and where values come
from when there are several."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from core.eval.errors import InputError
from core.eval.plan.secret_values import (
    available_values,
    parse_dotenv,
    read_secrets_file,
    secrets_in_environment,
)


def test_dotenv_lines() -> None:
    text = (
        "# provider keys\n"
        "\n"
        "OPENAI_API_KEY=sk-plain\n"
        "export JUDGE_TOKEN = 'quoted value'\n"
        'DOUBLE="a b=c"\n'
        "EMPTY=\n"
        "TWICE=first\n"
        "TWICE=second\n"
    )
    assert parse_dotenv(text, "secrets.env") == {
        "OPENAI_API_KEY": "sk-plain",
        "JUDGE_TOKEN": "quoted value",
        "DOUBLE": "a b=c",
        "EMPTY": "",
        "TWICE": "second",
    }


def test_bad_lines_are_named_by_number_never_by_content() -> None:
    text = "GOOD=1\nsk-pasted-alone\n9NAME=x\nOPEN='never closed\n"
    with pytest.raises(InputError) as caught:
        parse_dotenv(text, "secrets.env")
    problems = [str(problem) for problem in caught.value.problems]
    assert [p.split(": ", 2)[:2] for p in problems] == [
        ["secrets.env:2", "--secrets-file"],
        ["secrets.env:3", "--secrets-file"],
        ["secrets.env:4", "--secrets-file"],
    ]
    for secret in ("sk-pasted-alone", "never closed", "9NAME"):
        assert secret not in str(caught.value)


def test_a_file_or_stdin(tmp_path: Path) -> None:
    path = tmp_path / "secrets.env"
    path.write_text("A=from-file\n")
    assert read_secrets_file(str(path)) == {"A": "from-file"}
    assert read_secrets_file("-", stdin=io.StringIO("A=from-stdin\n")) == {"A": "from-stdin"}
    with pytest.raises(InputError, match="secrets file not found"):
        read_secrets_file(str(tmp_path / "missing.env"))


def test_the_file_comes_first_then_the_environment() -> None:
    environ = {"A": "env-a", "B": "env-b", "C": ""}
    merged = available_values({"A": "file-a", "B": "", "D": "file-d"}, environ)
    assert {name: merged.get(name) for name in "ABCD"} == {
        "A": "file-a",
        "B": "env-b",  # an empty value in the file counts as none
        "C": None,  # as does an empty variable
        "D": "file-d",
    }


def test_secrets_are_in_the_environment_for_the_block_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVAL_SECRET_KEPT", "before")
    monkeypatch.delenv("EVAL_SECRET_NEW", raising=False)
    with secrets_in_environment({"EVAL_SECRET_KEPT": "during", "EVAL_SECRET_NEW": "new"}):
        assert os.environ["EVAL_SECRET_KEPT"] == "during"
        assert os.environ["EVAL_SECRET_NEW"] == "new"
    assert os.environ["EVAL_SECRET_KEPT"] == "before"
    assert "EVAL_SECRET_NEW" not in os.environ
