"""How many rollouts this process can keep in flight with the file descriptors it may open.

Each rollout in flight holds descriptors of the eval: its long poll, and its model call
through the gateway (the rollout server's connection in, ours to the model out); with the
stub model in this process, its end of the model call as well (no rollout server runs in
this process: the demo's has a process of its own, `core.eval.servers.embedded`). The soft
`RLIMIT_NOFILE` bounds them all: past it every new connection fails with EMFILE ("Too many
open files"), which looks like a server that stopped answering. `DescriptorBudget.ceiling` is
the most rollouts in flight that fit, leaving `RESERVED_FDS` for the rest (stdio, the results
files, the listening sockets, health reads and cancels, a launched or demo server's pipes).
"""

from __future__ import annotations

import errno
import resource
from dataclasses import dataclass

RESERVED_FDS = 64
PER_ROLLOUT_FDS = 3
# The stub model's end of each model call.
IN_PROCESS_MODEL_FDS = 1
# A listener's connections when the process may open descriptors without limit.
UNBOUNDED_CONNECTIONS = 1 << 16


@dataclass(frozen=True)
class DescriptorBudget:
    """The file descriptors this process may open, and how many one rollout holds."""

    #: The soft RLIMIT_NOFILE; None when unlimited.
    limit: int | None
    per_rollout: int

    @property
    def ceiling(self) -> int | None:
        """The most rollouts in flight that fit (at least 1); None: no bound."""
        if self.limit is None:
            return None
        return max(1, (self.limit - RESERVED_FDS) // self.per_rollout)

    def listener_connections(self, least: int) -> int:
        """How many connections a listener of the run (its model gateway) takes at once: one
        per rollout in flight, so as many as the process can keep in flight (the ceiling),
        and never fewer than `least`; with no descriptor limit, `UNBOUNDED_CONNECTIONS`."""
        ceiling = self.ceiling
        return max(least, UNBOUNDED_CONNECTIONS if ceiling is None else ceiling)

    def lowered(self, asked: str, to: int) -> str:
        """The notice that `asked` in flight was lowered `to` the ceiling, and why."""
        return (
            f"{asked} lowered to {to}: each rollout in flight holds about {self.per_rollout} "
            f"of this process's file descriptors, and it may open {self.limit} "
            f"(RLIMIT_NOFILE, {RESERVED_FDS} of them kept for the rest); raise it with "
            "ulimit -n to run more at once"
        )


def descriptor_budget(*, model_in_process: bool) -> DescriptorBudget:
    """This process's budget, with the model in it or not."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    per_rollout = PER_ROLLOUT_FDS + (IN_PROCESS_MODEL_FDS if model_in_process else 0)
    return DescriptorBudget(None if soft == resource.RLIM_INFINITY else soft, per_rollout)


def out_of_descriptors(exc: BaseException) -> bool:
    """Whether `exc`, or what caused it, is this process running out of file descriptors
    (EMFILE, or ENFILE for the whole system): our fault, never the server's."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.EMFILE, errno.ENFILE):
            return True
        current = current.__cause__ or current.__context__
    return False


__all__ = ["RESERVED_FDS", "DescriptorBudget", "descriptor_budget", "out_of_descriptors"]
