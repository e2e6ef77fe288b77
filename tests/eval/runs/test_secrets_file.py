"""`--secrets-file PATH|-` through the command: the `[secrets]` values reach the launched rollout
server and nothing the run writes or prints; a name without a value is bad input naming it."""

from __future__ import annotations

import secrets
from pathlib import Path

from tests.eval.runs.command import child_env, run_eval
from tests.eval.runs.files import envelope, run_folder
from tests.eval.runs.servers import ServedDemo

TOKEN = f"tok-{secrets.token_hex(16)}"
NAME = "MULTIPLY_TOKEN"
# The fixture's entrypoint, after saying which token it got: logs.txt shows that line masked.
TELLING_ENTRYPOINT = f"""\
import os
import main as base

print("token is " + os.environ["{NAME}"], flush=True)
base.main()
"""


def secret_config(workspace: Path) -> str:
    """A config of the workspace that needs `NAME`, served by the telling entrypoint."""
    (workspace / "rollouts" / "multiply" / "telling.py").write_text(TELLING_ENTRYPOINT)
    config = workspace / "configs" / "eval" / "multiply.toml"
    text = config.read_text().replace('"main.py"', '"telling.py"')
    config.with_name("secret.toml").write_text(text + f'\n[secrets]\nrequired = ["{NAME}"]\n')
    return "configs/eval/secret.toml"


# The fixture's server with a workflow that says its token in its live conversation, which it
# shows while it runs (a `MessageSource`: the server writes it to previews/<id>/preview.json);
# the sample it returns for grading leaves that message out.
CONFIDING_ENTRYPOINT = f"""\
import os

import main as base
from server_stub import get_rollout_context
from server_stub.message_source import MessageSource


class Confiding(base.AskTheModel):
    async def run(self, ctx):
        told = {{"role": "user", "content": "my token is " + os.environ["{NAME}"]}}
        conversation = [*ctx.prompt, told]
        get_rollout_context().set_sample_source(MessageSource(conversation))
        answered = await super().run(ctx)
        conversation.append(answered.messages[-1])
        return answered


base.AskTheModel = Confiding
base.main()
"""


def confiding_config(workspace: Path) -> str:
    """A config of the workspace that needs `NAME`, served by the confiding entrypoint."""
    (workspace / "rollouts" / "multiply" / "confiding.py").write_text(CONFIDING_ENTRYPOINT)
    config = workspace / "configs" / "eval" / "multiply.toml"
    text = config.read_text().replace('"main.py"', '"confiding.py"')
    config.with_name("confiding.toml").write_text(text + f'\n[secrets]\nrequired = ["{NAME}"]\n')
    return "configs/eval/confiding.toml"


def everything(workspace: Path, *outputs: str) -> str:
    files = [p.read_bytes().decode("utf-8", "replace") for p in workspace.rglob("*") if p.is_file()]
    return "\n".join([*files, *outputs])


def test_a_secrets_file_reaches_the_server_and_nothing_written(workspace: Path) -> None:
    config = secret_config(workspace)
    (workspace / "secrets.env").write_text(f"# for the judge\nexport {NAME}='{TOKEN}'\n")
    # A relative --secrets-file is the workspace root's, like every path of the run.
    result = run_eval(
        f"../{config}",
        *("--chat-url", "stub", "--secrets-file", "secrets.env", "--name", "file", "--json"),
        cwd=workspace / "data",
    )
    assert result.returncode == 0, result.stderr
    assert envelope(result.stdout)["resource"]["succeeded"] == 6
    logs = (run_folder(workspace, "file") / "logs.txt").read_text()
    assert "token is ***" in logs, "the server got a value, and the log masks it"
    (workspace / "secrets.env").unlink()
    assert TOKEN not in everything(workspace, result.stdout, result.stderr)


def test_a_secret_the_rollout_says_is_masked_in_its_live_previews(workspace: Path) -> None:
    config = confiding_config(workspace)
    (workspace / "secrets.env").write_text(f"{NAME}={TOKEN}\n")
    result = run_eval(
        config,
        *("--chat-url", "stub", "--secrets-file", "secrets.env", "--name", "told", "--json"),
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr
    previews = sorted((run_folder(workspace, "told") / "previews").glob("*/preview.json"))
    assert len(previews) == 6, "each rollout's conversation was shown live"
    for preview in previews:
        assert "my token is [REDACTED]" in preview.read_text()
    (workspace / "secrets.env").unlink()
    assert TOKEN not in everything(workspace, result.stdout, result.stderr)


def test_secrets_from_stdin(workspace: Path, demo_server: ServedDemo) -> None:
    config = secret_config(workspace)
    result = run_eval(
        config,
        *("--server", demo_server.url, "--chat-url", "stub", "--secrets-file", "-"),
        *("--name", "stdin"),
        cwd=workspace,
        stdin=f"{NAME}={TOKEN}\n",
    )
    assert result.returncode == 0, result.stderr
    assert "Run stdin finished" in result.stdout
    assert TOKEN not in everything(workspace, result.stdout, result.stderr)


def test_the_environment_fills_in_what_the_file_does_not_have(
    workspace: Path, demo_server: ServedDemo
) -> None:
    config = secret_config(workspace)
    server = ("--server", demo_server.url, "--chat-url", "stub")
    (workspace / "other.env").write_text("SOMETHING_ELSE=1\n")
    result = run_eval(
        config,
        *(*server, "--secrets-file", "other.env", "--name", "env"),
        cwd=workspace,
        env=child_env(**{NAME: TOKEN}),
    )
    assert result.returncode == 0, result.stderr


def test_a_secret_without_a_value_is_bad_input_naming_it(
    workspace: Path, demo_server: ServedDemo
) -> None:
    config = secret_config(workspace)
    server = ("--server", demo_server.url, "--chat-url", "stub")
    (workspace / "empty.env").write_text(f"{NAME}=\n")
    ways: list[tuple[tuple[str, ...], str | None]] = [
        ((), None),  # neither a file nor the environment
        (("--secrets-file", "empty.env"), None),  # an empty value is none
        (("--secrets-file", "-"), ""),  # nothing on stdin
    ]
    for extra, stdin in ways:
        result = run_eval(config, *server, *extra, cwd=workspace, stdin=stdin)
        assert result.returncode == 2, result.stderr
        assert f"{config}:" in result.stderr
        assert f"secrets.required: no value for {NAME}: give it in a --secrets-file" in (
            result.stderr
        )
        assert result.stdout == ""
    assert not (workspace / ".osmosis").exists(), "bad input writes nothing"


def test_a_bad_secrets_line_is_named_by_number_only(workspace: Path) -> None:
    config = secret_config(workspace)
    result = run_eval(
        config, "--chat-url", "stub", "--secrets-file", "-", cwd=workspace, stdin=f"{TOKEN}\n"
    )
    assert result.returncode == 2
    assert "<stdin>:1: --secrets-file: expected NAME=value" in result.stderr
    assert TOKEN not in result.stderr
