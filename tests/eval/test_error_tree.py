"""The eval's errors are one tree under `EvalError`, drawn in `core.eval.errors` (httpx's way),
and each keeps the builtin base its callers catch it by."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import core.eval.errors
from core.eval.attach.client import (
    ControlActionError,
    ControlLost,
    ControlUnavailable,
    ViewerRefused,
)
from core.eval.attach.protocol import ProtocolViolation
from core.eval.attach.unix_socket import ControlError, ControlSocketError
from core.eval.compare.compared_run import CompareInputError
from core.eval.errors import EvalError, InputError
from core.eval.events.receiver import EventReceiverError
from core.eval.gateway.errors import GatewayError, LiteLLMUnavailable, PreflightError, UpstreamError
from core.eval.results.folder import ResumeRefused, RunFolderError
from core.eval.results.lock import RunLocked
from core.eval.runner import ControlRefused
from core.eval.servers.launcher import LaunchError
from core.eval.servers.pool import AllServersDown
from core.eval.watch import WatchError
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
    (ViewerRefused, ControlError),
    (ControlLost, ControlError),
    (ControlActionError, ControlError),
    (CompareInputError, EvalError),
    (WatchError, EvalError),
    (ReplayError, EvalError),
    (ControlRefused, RuntimeError),
    (RunLocked, EvalError),
    (EventReceiverError, RuntimeError),
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


def _every_subclass(root: type[Exception]) -> set[type[Exception]]:
    found: set[type[Exception]] = set()
    stack = [root]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                stack.append(sub)
    return found


def test_every_subclass_of_eval_error_is_drawn_in_the_tree() -> None:
    """A new error class anywhere in the engine or the dashboard, missing from the drawn tree
    (or from TREE here), fails: the tree cannot drift from the code again."""
    import core.eval
    import tui

    for package in (core.eval, tui):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)
    drawn = core.eval.errors.__doc__ or ""
    classes = _every_subclass(EvalError)
    assert sorted(c.__name__ for c in classes if f" {c.__name__} " not in drawn) == []
    assert sorted(c.__name__ for c in classes - {error for error, _ in TREE}) == []
