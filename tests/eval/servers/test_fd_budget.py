"""How many connections the run's model gateway takes at once (core/eval/servers/fd_budget.py):
one per rollout the process can keep in flight. A fixed 2,048 answered the calls of a run
with 4,000 rollouts in flight 503 (bench/fleet.py: 9,298 of 12,000 work items failed)."""

from __future__ import annotations

from core.eval.servers.fd_budget import (
    RESERVED_FDS,
    UNBOUNDED_CONNECTIONS,
    DescriptorBudget,
)
from core.serving.loopback import HTTP_LIMITS

DEFAULT = HTTP_LIMITS.max_connections


def test_the_gateway_takes_a_connection_per_rollout_the_process_can_keep_in_flight() -> None:
    budget = DescriptorBudget(limit=20_000, per_rollout=3)
    assert budget.ceiling == (20_000 - RESERVED_FDS) // 3
    assert budget.listener_connections(DEFAULT) == budget.ceiling
    assert budget.listener_connections(DEFAULT) > 4_000


def test_never_fewer_than_the_listeners_default_nor_bounded_without_a_limit() -> None:
    assert DescriptorBudget(limit=1_024, per_rollout=4).listener_connections(DEFAULT) == DEFAULT
    assert DescriptorBudget(limit=None, per_rollout=3).listener_connections(DEFAULT) == (
        UNBOUNDED_CONNECTIONS
    )
