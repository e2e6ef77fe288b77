"""What the eval engine raises, as one tree, and bad-input reporting (EVAL.md §1).

Every error the eval raises on purpose is an `EvalError`; some are also the builtin their
callers have always caught. Where each one lives:

    EvalError
    ├── InputError            bad config, dataset or flags, every problem at once: exit 2
    │                         (here); also a port a flag gave found in use at start-up
    ├── RunFolderError        the results folder cannot be used as asked: exit 2
    │   │                     (core.eval.results.folder)
    │   └── ResumeRefused     a resume would change the inputs the run started with
    ├── LaunchError           a rollout server the eval starts (the workspace's, the
    │                         demo's) could not be started; also a RuntimeError
    │                         (core.eval.servers.launcher)
    ├── AllServersDown        no rollout server is left to send work to; also a RuntimeError
    │                         (core.eval.servers.pool)
    ├── ControlRefused        a front end's steering cannot act now (requeue a rollout that
    │                         is no work item in flight, ...); also a RuntimeError
    │                         (core.eval.runner)
    ├── RunLocked             another live run holds the run name's lock: exit 1
    │                         (core.eval.results.lock)
    ├── EventReceiverError    the ownership-event receiver cannot be bound or used; also a
    │                         RuntimeError (core.eval.events.receiver)
    ├── GatewayError          the model gateway, or an upstream model; also a RuntimeError
    │   │                     (core.eval.gateway.errors)
    │   ├── UpstreamError     one model call failed; carries the status to answer with
    │   ├── PreflightError    the run's model is unusable (bad model, refused key,
    │   │                     unreachable): the eval stops before dispatching (exit 2)
    │   └── LiteLLMUnavailable  `model_path` needs LiteLLM and the extra is not installed
    ├── ControlError          a run's control socket (core.eval.attach.unix_socket)
    │   ├── ControlSocketError    it cannot be bound or reached
    │   ├── ProtocolViolation     a line that is no message (core.eval.attach.protocol)
    │   ├── ControlUnavailable    a viewer's: no live run there (core.eval.attach.client)
    │   ├── ViewerRefused         the run refused the viewer (another protocol version, another
    │   │                         user)
    │   ├── ControlLost           the connection ended before the run did
    │   └── ControlActionError    the run could not do what a viewer asked
    ├── CompareInputError     a run cannot be compared as asked (not a run, no row in
    │                         common, another dataset): exit 2 (core.eval.compare.compared_run)
    ├── WatchError            a watch cannot start: its output folder cannot be written; also
    │                         a RuntimeError (core.eval.watch)
    └── ReplayError           a run's recording cannot be replayed (tui.sources.replay)

The rollout protocol's own errors (`RolloutProtocolError`, `RolloutAdmissionTimeoutError`)
are not eval errors: they are the client's, documented in `core.errors`.

Config, dataset and flag problems are collected rather than raised one at a time, so the user
sees everything wrong with their input in one go, each problem pointing at a file, a line and a
key. The CLI prints `str(InputError)` and exits 2.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar


class EvalError(Exception):
    """The root of the eval's errors (the tree is in this module's docstring)."""


@dataclass(frozen=True)
class InputProblem:
    """One thing wrong with the user's input, and where it is."""

    source: str
    """The file path as the user gave it, or the flag at fault (`--rows`)."""
    line: int | None
    """1-based line in `source`, when known."""
    key: str | None
    """TOML key path (`evaluation.limit`), dataset column (`user_prompt`) or flag."""
    message: str

    def __str__(self) -> str:
        location = self.source if self.line is None else f"{self.source}:{self.line}"
        if self.key is None:
            return f"{location}: {self.message}"
        return f"{location}: {self.key}: {self.message}"


class InputError(EvalError):
    """Bad input (config, dataset or flags); `problems` holds every problem found.

    `str()` lists the problems one per line; past `max_listed` it ends with a count of the
    rest, so a dataset with thousands of bad rows does not flood the terminal. `problems`
    always holds all of them.
    """

    max_listed: ClassVar[int] = 20

    def __init__(self, problems: Iterable[InputProblem]) -> None:
        self.problems: list[InputProblem] = list(problems)
        if not self.problems:
            raise ValueError("InputError needs at least one problem")
        # The problems themselves are the args, so the exception survives pickling intact.
        super().__init__(self.problems)

    @classmethod
    def single(
        cls, source: str, message: str, *, line: int | None = None, key: str | None = None
    ) -> InputError:
        return cls([InputProblem(source=source, line=line, key=key, message=message)])

    def __str__(self) -> str:
        lines = [str(problem) for problem in self.problems[: self.max_listed]]
        hidden = len(self.problems) - len(lines)
        if hidden > 0:
            lines.append(f"... and {hidden} more problem{'s' if hidden != 1 else ''}")
        return "\n".join(lines)
