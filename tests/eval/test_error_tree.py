"""The eval's errors are one tree under `EvalError`, drawn in `core.eval.errors` (httpx's way),
and each keeps the builtin base its callers catch it by."""

from __future__ import annotations

import pytest

import core.eval.errors
from core.eval.attach.client import (
    ControlActionError,
    ControlLost,
    ControlRefused,
    ControlUnavailable,
)
from core.eval.attach.protocol import ProtocolViolation
from core.eval.attach.unix_socket import ControlError, ControlSocketError
from core.eval.errors import EvalError, InputError
from core.eval.gateway.errors import GatewayError, LiteLLMUnavailable, PreflightError, UpstreamError
from core.eval.results.folder import ResumeRefused, RunFolderError
from core.eval.servers.launcher import LaunchError
from core.eval.servers.pool import AllServersDown
from tui.sources.replay import ReplayError

TREE: list[tuple[type[Exception], type[Exception]]] = [
    (InputError, EvalError),
    (RunFolderError, EvalError),
    (ResumeRefused, RunFolderError),
    (LaunchError, RuntimeError),
    (AllServersDown, RuntimeError),
    (GatewayError, RuntimeError),
    (UpstreamError, GatewayError),
    (PreflightError, GatewayError),
    (LiteLLMUnavailable, GatewayError),
    (ControlError, EvalError),
    (ControlSocketError, ControlError),
    (ProtocolViolation, ControlError),
    (ControlUnavailable, ControlError),
    (ControlRefused, ControlError),
    (ControlLost, ControlError),
    (ControlActionError, ControlError),
    (ReplayError, EvalError),
]


@pytest.mark.parametrize(("error", "parent"), TREE, ids=[error.__name__ for error, _ in TREE])
def test_every_eval_error_is_an_eval_error(error: type[Exception], parent: type[Exception]) -> None:
    assert issubclass(error, EvalError)
    assert issubclass(error, parent)


def test_the_tree_in_the_docstring_names_every_one() -> None:
    tree = core.eval.errors.__doc__
    assert tree is not None
    missing = [error.__name__ for error, _ in TREE if f" {error.__name__} " not in tree]
    assert missing == []
