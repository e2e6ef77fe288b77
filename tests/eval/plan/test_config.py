"""The eval config (EVAL.md §2): schema, and problems with file/line/key."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from core.eval.errors import InputError, InputProblem
from core.eval.plan.config import EvalConfig, load_config
from core.eval.untrusted_json import MAX_NESTING, TOO_DEEP

VALID = """\
[experiment]
rollout = "multiply"
entrypoint = "main.py"
model_path = "openai/gpt-5-mini"
dataset = "multiply"

[evaluation]
limit = 200
n = 2
batch_size = 8
pass_threshold = 1
agent_workflow_timeout_s = 450
grader_timeout_s = 150.5

[env]
MODE = "fast"

[secrets]
required = ["OPENAI_API_KEY"]
"""

EXPERIMENT = """\
[experiment]
rollout = "multiply"
entrypoint = "main.py"
model_path = "m"
dataset = "multiply"
"""


def write(tmp_path: Path, text: str, name: str = "configs/eval.toml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(path: Path, secret_values: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(InputError) as caught:
        load_config(path, secret_values={} if secret_values is None else secret_values)
    return [str(problem) for problem in caught.value.problems]


def no_value(name: str) -> str:
    """The problem of a `[secrets]` name without a value."""
    return (
        f"no value for {name}: give it in a --secrets-file (NAME=value lines), or set the "
        f"environment variable {name}"
    )


def only_problem(path: Path, secret_values: dict[str, str] | None = None) -> str:
    problems = problems_of(path, secret_values)
    assert len(problems) == 1, problems
    return problems[0]


# --------------------------------------------------------------------------------------------
# Valid configs


def test_full_config_is_read(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)
    config = load_config(path, secret_values={"OPENAI_API_KEY": "sk-test"})
    assert config == EvalConfig(
        path=path,
        workspace=tmp_path.resolve(),
        rollout="multiply",
        entrypoint="main.py",
        model_path="openai/gpt-5-mini",
        dataset="multiply",
        limit=200,
        n=2,
        batch_size=8,
        pass_threshold=1.0,
        agent_timeout_sec=450.0,
        grader_timeout_sec=150.5,
        env={"MODE": "fast"},
        required_secrets=("OPENAI_API_KEY",),
    )
    assert isinstance(config.pass_threshold, float)
    assert config.entrypoint_path() == tmp_path.resolve() / "rollouts" / "multiply" / "main.py"


def test_minimal_config_leaves_optional_values_unset(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, EXPERIMENT), secret_values={})
    assert (config.limit, config.n, config.batch_size, config.pass_threshold) == (None,) * 4
    assert (config.agent_timeout_sec, config.grader_timeout_sec) == (None, None)
    assert config.env == {}
    assert config.required_secrets == ()


def test_config_outside_configs_folder_uses_its_own_folder_as_workspace(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, EXPERIMENT, name="ws/eval.toml"), secret_values={})
    assert config.workspace == (tmp_path / "ws").resolve()


@pytest.mark.parametrize(
    "name", ["configs/eval/x.toml", "configs/x.toml", "x.toml", "elsewhere/deeper/x.toml"]
)
def test_workspace_is_the_folder_above_holding_rollouts_and_configs(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / "rollouts").mkdir()
    (tmp_path / "configs" / "eval").mkdir(parents=True)
    config = load_config(write(tmp_path, EXPERIMENT, name=name), secret_values={})
    assert config.workspace == tmp_path.resolve()
    assert config.entrypoint_path() == tmp_path.resolve() / "rollouts" / "multiply" / "main.py"


def test_the_nearest_workspace_wins(tmp_path: Path) -> None:
    inner = tmp_path / "outer" / "inner"
    for root in (tmp_path / "outer", inner):
        (root / "rollouts").mkdir(parents=True)
        (root / "configs" / "eval").mkdir(parents=True)
    config = load_config(write(inner, EXPERIMENT, name="configs/eval/x.toml"), secret_values={})
    assert config.workspace == inner.resolve()


def test_platform_only_keys_of_official_configs_are_accepted(tmp_path: Path) -> None:
    text = EXPERIMENT + 'branch = "main"\ncommit_sha = "abc1234"\n[advanced]\nanything = 1\n'
    config = load_config(write(tmp_path, text), secret_values={})
    assert config.rollout == "multiply"


def test_byte_order_mark_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "eval.toml"
    path.write_bytes(b"\xef\xbb\xbf" + EXPERIMENT.encode())
    assert load_config(path, secret_values={}).dataset == "multiply"


def test_entrypoint_may_be_a_relative_path_inside_the_rollout(tmp_path: Path) -> None:
    text = EXPERIMENT.replace('"main.py"', '"src/./server.py"')
    config = load_config(write(tmp_path, text), secret_values={})
    assert config.entrypoint_path() == tmp_path.resolve() / "rollouts/multiply/src/server.py"


def test_default_dataset_prefers_jsonl_then_csv_then_parquet(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, EXPERIMENT), secret_values={})
    assert config.default_dataset_path() is None
    assert (
        config.default_dataset_pattern()
        == f"{tmp_path.resolve()}/data/multiply.{{jsonl,csv,parquet}}"
    )
    data = tmp_path / "data"
    data.mkdir()
    (data / "multiply.parquet").write_bytes(b"PAR1")
    assert config.default_dataset_path() == tmp_path.resolve() / "data" / "multiply.parquet"
    (data / "multiply.csv").write_text("user_prompt,label\n")
    assert config.default_dataset_path() == tmp_path.resolve() / "data" / "multiply.csv"
    (data / "multiply.jsonl").write_text("{}\n")
    assert config.default_dataset_path() == tmp_path.resolve() / "data" / "multiply.jsonl"


def test_default_dataset_never_leaves_the_data_folder(tmp_path: Path) -> None:
    (tmp_path / "secret.jsonl").write_text("{}\n")
    config = load_config(
        write(tmp_path, EXPERIMENT.replace('dataset = "multiply"', 'dataset = "../secret"')),
        secret_values={},
    )
    assert config.default_dataset_path() is None


# --------------------------------------------------------------------------------------------
# Reading and syntax


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    assert only_problem(path) == f"{path}: config file not found"


def test_directory_instead_of_file(tmp_path: Path) -> None:
    assert only_problem(tmp_path) == f"{tmp_path}: is a directory, not a config file"


def test_syntax_error_reports_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '[experiment]\nrollout = "x"\nentrypoint = main.py\n')
    assert only_problem(path) == f"{path}:3: invalid TOML at column 14: Invalid value"


def test_syntax_error_at_end_of_document_points_at_the_last_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[experiment]\nrollout = [1,\n  2,\n")
    assert only_problem(path) == f"{path}:3: invalid TOML: Invalid value"


def test_duplicate_key_is_a_syntax_error_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[experiment]\n\n[experiment]\n")
    problem = only_problem(path)
    assert problem.startswith(f"{path}:3: invalid TOML at column ")


def test_integer_too_long_to_convert_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    path = write(tmp_path, EXPERIMENT + "[evaluation]\nlimit = " + "9" * 5000 + "\n")
    assert only_problem(path).startswith(f"{path}: invalid TOML: Exceeds the limit (4300 digits)")


def test_arrays_too_deep_to_parse_are_a_problem_not_a_crash(tmp_path: Path) -> None:
    path = write(tmp_path, EXPERIMENT + "[advanced]\nx = " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert only_problem(path) == f"{path}: invalid TOML: {TOO_DEEP}"


def test_tables_nested_past_the_limit_name_their_key_and_line(tmp_path: Path) -> None:
    # Table headers parse at any depth; the run's manifest could not record them.
    keys = ".".join(["a"] * MAX_NESTING)
    path = write(tmp_path, EXPERIMENT + f"[advanced.{keys}]\nb = 1\n")
    assert only_problem(path) == f"{path}:6: advanced.a: {TOO_DEEP}"
    path = write(tmp_path, EXPERIMENT + f"[advanced.{'.'.join(['a'] * (MAX_NESTING - 1))}]\n")
    assert load_config(path, secret_values={}).advanced


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "eval.toml"
    path.write_bytes(b'[experiment]\nrollout = "caf\xe9"\n')
    assert only_problem(path) == (
        f"{path}:2: not valid UTF-8 (byte 0xe9); TOML files must be UTF-8"
    )


# --------------------------------------------------------------------------------------------
# Schema problems


def test_missing_experiment_section_has_no_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[evaluation]\nn = 1\n")
    assert only_problem(path) == f"{path}: experiment: missing required section [experiment]"


def test_experiment_that_is_not_a_table(tmp_path: Path) -> None:
    path = write(tmp_path, 'experiment = "multiply"\n')
    assert only_problem(path) == f'{path}:1: experiment: expected a table, got "multiply"'


@pytest.mark.parametrize("key", ["rollout", "entrypoint", "model_path", "dataset"])
def test_each_missing_required_key_points_at_the_section(tmp_path: Path, key: str) -> None:
    text = "\n# comment\n" + "\n".join(
        line for line in EXPERIMENT.splitlines() if not line.startswith(f"{key} =")
    )
    path = write(tmp_path, text)
    problem = only_problem(path)
    assert problem.startswith(f"{path}:3: experiment.{key}: missing required key (")


def test_empty_required_string(tmp_path: Path) -> None:
    path = write(tmp_path, EXPERIMENT.replace('model_path = "m"', 'model_path = "  "'))
    assert only_problem(path) == (
        f"{path}:4: experiment.model_path: must not be empty (the model to evaluate)"
    )


def test_unknown_section_and_top_level_key(tmp_path: Path) -> None:
    path = write(tmp_path, "stray = 1\n" + EXPERIMENT + "\n[evaluaton]\nlimit = 3\n")
    expected = "expected one of [experiment], [evaluation], [env], [secrets]"
    assert problems_of(path) == [
        f"{path}:1: stray: unknown top-level key; {expected}",
        f"{path}:8: evaluaton: unknown section; {expected}",
    ]


def test_unknown_keys_in_each_section(tmp_path: Path) -> None:
    text = (
        EXPERIMENT
        + 'model = "typo"\n'  # line 6
        + "[evaluation]\nlimt = 5\n"  # line 8
        + '[secrets]\nrequire = ["A"]\n'  # line 10
    )
    path = write(tmp_path, text)
    assert problems_of(path) == [
        f"{path}:6: experiment.model: unknown key; expected one of rollout, entrypoint, "
        "model_path, dataset, branch, commit_sha",
        f"{path}:8: evaluation.limt: unknown key; expected one of limit, n, batch_size, "
        "pass_threshold, agent_workflow_timeout_s, grader_timeout_s",
        f"{path}:10: secrets.require: unknown key; expected one of required",
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('limit = "ten"', 'evaluation.limit: expected an integer, got "ten"'),
        ("limit = true", "evaluation.limit: expected an integer, got true"),
        ("n = 2.0", "evaluation.n: expected an integer, got 2.0"),
        ("n = 0", "evaluation.n: must be at least 1, got 0"),
        (
            "n = 100000000000",
            "evaluation.n: at most 1,000,000 (the most work items a run holds), got 100000000000",
        ),
        (
            "n = " + "9" * 30,
            "evaluation.n: at most 1,000,000 (the most work items a run holds), "
            "got an integer outside the 64-bit range",
        ),
        ("batch_size = -3", "evaluation.batch_size: must be at least 1, got -3"),
        (
            "batch_size = -" + "9" * 30,
            "evaluation.batch_size: must be at least 1, got an integer outside the 64-bit range",
        ),
        ("batch_size = [8]", "evaluation.batch_size: expected an integer, got an array"),
        ("pass_threshold = false", "evaluation.pass_threshold: expected a number, got false"),
        ("pass_threshold = nan", "evaluation.pass_threshold: must be a finite number, got nan"),
        (
            "agent_workflow_timeout_s = 0",
            "evaluation.agent_workflow_timeout_s: must be greater than 0, got 0",
        ),
        (
            "agent_workflow_timeout_s = inf",
            "evaluation.agent_workflow_timeout_s: must be a finite number, got inf",
        ),
        (
            "grader_timeout_s = 1979-05-27",
            "evaluation.grader_timeout_s: expected a number, got a date/time (1979-05-27)",
        ),
        (
            "grader_timeout_s = { s = 1 }",
            "evaluation.grader_timeout_s: expected a number, got a table",
        ),
    ],
)
def test_wrong_evaluation_values(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, EXPERIMENT + "[evaluation]\n\n" + line + "\n")
    assert only_problem(path) == f"{path}:8: {message}"


def test_wrong_type_for_experiment_strings(tmp_path: Path) -> None:
    path = write(tmp_path, EXPERIMENT.replace('dataset = "multiply"', "dataset = 7"))
    assert only_problem(path) == f"{path}:5: experiment.dataset: expected a string, got 7"


def test_every_problem_is_reported_together_in_file_order(tmp_path: Path) -> None:
    text = """\
[evaluation]
limit = "ten"
n = true

[experiment]
rollout = "../outside"
model_path = 3
dataset = "d"

[env]
GOOD = "ok"
BAD = 1

[surprise]

[secrets]
required = ["NOT_SET"]
"""
    path = write(tmp_path, text)
    assert problems_of(path) == [
        f'{path}:2: evaluation.limit: expected an integer, got "ten"',
        f"{path}:3: evaluation.n: expected an integer, got true",
        f"{path}:5: experiment.entrypoint: missing required key "
        "(the file inside rollouts/<rollout>/ that serves the rollout)",
        f"{path}:6: experiment.rollout: must not contain '..', got \"../outside\"",
        f"{path}:7: experiment.model_path: expected a string, got 3",
        f"{path}:12: env.BAD: expected a string, got 1",
        f"{path}:14: surprise: unknown section; expected one of [experiment], [evaluation], "
        "[env], [secrets]",
        f"{path}:17: secrets.required: {no_value('NOT_SET')}",
    ]


# --------------------------------------------------------------------------------------------
# Rollout paths: the launcher must never run anything outside rollouts/<rollout>/


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("..", "must not contain '..'"),
        (".", "must name something inside its folder"),
        ("a/b", "must be a single folder name under rollouts/, without path separators"),
        ("a\\\\b", "must be a single folder name under rollouts/, without path separators"),
        ("/etc", "must be a relative path, not an absolute one"),
        ("C:\\\\rollouts", "must be a relative path, not an absolute one"),
        ("x\\u0000y", "must not contain NUL characters"),
    ],
)
def test_rollout_must_be_one_folder_name(tmp_path: Path, value: str, reason: str) -> None:
    path = write(tmp_path, EXPERIMENT.replace('rollout = "multiply"', f'rollout = "{value}"'))
    problem = only_problem(path)
    assert problem.startswith(f"{path}:2: experiment.rollout: {reason}, got ")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("../main.py", "must not contain '..'"),
        ("src/../../other/main.py", "must not contain '..'"),
        ("src\\\\..\\\\..\\\\main.py", "must not contain '..'"),
        ("/usr/bin/python", "must be a relative path, not an absolute one"),
        ("C:/main.py", "must be a relative path, not an absolute one"),
        ("\\\\\\\\server\\\\share\\\\main.py", "must be a relative path, not an absolute one"),
        ("./", "must name something inside its folder"),
    ],
)
def test_entrypoint_must_stay_inside_the_rollout(tmp_path: Path, value: str, reason: str) -> None:
    path = write(tmp_path, EXPERIMENT.replace('entrypoint = "main.py"', f'entrypoint = "{value}"'))
    problem = only_problem(path)
    assert problem.startswith(f"{path}:3: experiment.entrypoint: {reason}, got ")


def test_hostile_value_is_escaped_and_shortened_in_messages(tmp_path: Path) -> None:
    hostile = "\\u001b[31m" + "x" * 200
    path = write(tmp_path, EXPERIMENT.replace('"main.py"', f'"../{hostile}"'))
    problem = only_problem(path)
    assert "\x1b" not in problem
    assert '"../\\x1b[31m' in problem
    assert problem.endswith("… (208 characters)")


# --------------------------------------------------------------------------------------------
# [env] and [secrets]


def test_env_names_and_values(tmp_path: Path) -> None:
    text = EXPERIMENT + '[env]\nOK_1 = "a"\nlower = "b"\n_OSMOSIS_ROLLOUT_PORT = "1"\nNUM = 2\n'
    path = write(tmp_path, text)
    assert problems_of(path) == [
        f"{path}:8: env.lower: not a valid variable name (A-Z, 0-9 and _, not starting with 0-9)",
        f"{path}:9: env._OSMOSIS_ROLLOUT_PORT: names starting with _OSMOSIS_ are reserved",
        f"{path}:10: env.NUM: expected a string, got 2",
    ]


def test_every_missing_secret_is_reported(tmp_path: Path) -> None:
    text = (
        EXPERIMENT
        + '[secrets]\nrequired = [\n  "SET",\n  "UNSET",\n  "EMPTY",\n  "ALSO_UNSET",\n]\n'
    )
    path = write(tmp_path, text)
    assert problems_of(path, {"SET": "v", "EMPTY": ""}) == [
        f"{path}:7: secrets.required: {no_value('UNSET')}",
        f"{path}:7: secrets.required: {no_value('EMPTY')}",
        f"{path}:7: secrets.required: {no_value('ALSO_UNSET')}",
    ]


def test_secrets_read_os_environ_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, EXPERIMENT + '[secrets]\nrequired = ["EVAL_TEST_SECRET"]\n')
    monkeypatch.setenv("EVAL_TEST_SECRET", "value")
    assert load_config(path).required_secrets == ("EVAL_TEST_SECRET",)
    monkeypatch.delenv("EVAL_TEST_SECRET")
    with pytest.raises(InputError, match="no value for EVAL_TEST_SECRET: "):
        load_config(path)


def test_malformed_secret_lists(tmp_path: Path) -> None:
    text = EXPERIMENT + '[env]\nSHARED = "x"\n[secrets]\nrequired = ["A", 3, "b", "A", "SHARED"]\n'
    path = write(tmp_path, text)
    assert problems_of(path, {"A": "1", "SHARED": "1"}) == [
        f"{path}:9: secrets.required[1]: expected a string, got 3",
        f"{path}:9: secrets.required[2]: not a valid secret name "
        '(A-Z, 0-9 and _, starting with A-Z), got "b"',
        f"{path}:9: secrets.required[3]: A is listed twice",
        f"{path}:9: secrets.required: SHARED is also set in [env]; "
        "a variable must come from one place",
    ]


def test_secrets_required_must_be_an_array(tmp_path: Path) -> None:
    path = write(tmp_path, EXPERIMENT + '[secrets]\nrequired = "A"\n')
    assert only_problem(path) == (
        f'{path}:7: secrets.required: expected an array of names, got "A"'
    )


def test_secrets_section_without_required_is_fine_locally(tmp_path: Path) -> None:
    assert (
        load_config(write(tmp_path, EXPERIMENT + "[secrets]\n"), secret_values={}).required_secrets
        == ()
    )


# --------------------------------------------------------------------------------------------
# Problems and errors


def test_problem_rendering() -> None:
    assert str(InputProblem("configs/eval.toml", 7, "evaluation.limit", "bad")) == (
        "configs/eval.toml:7: evaluation.limit: bad"
    )
    assert str(InputProblem("x.toml", None, None, "gone")) == "x.toml: gone"
    assert str(InputProblem("--rows", None, "--rows", "bad")) == "--rows: --rows: bad"


def test_input_error_pickles_with_its_problems() -> None:
    error = InputError.single("a.toml", "broken", line=3, key="k")
    copy = pickle.loads(pickle.dumps(error))
    assert copy.problems == error.problems
    assert str(copy) == "a.toml:3: k: broken"


def test_input_error_needs_a_problem() -> None:
    with pytest.raises(ValueError):
        InputError([])
