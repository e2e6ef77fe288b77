"""Token counts that others report (a model's `usage`, a result's metrics, a trajectory),
checked before they are summed or written.

A token count is a whole number from 0 to `MAX_TOKEN_COUNT` (2**53 - 1, the largest integer
every JSON reader holds exactly); `12.0` is one, JSON having a single kind of number. Anything
else a model or a rollout server reports (NaN, Infinity, a negative or fractional number,
10**30, a string) is not a count but unknown data: it is never summed or written, and the
reader logs a warning naming it. `int(Infinity)` used to end the eval with a traceback, and a
negative count was written and summed.
"""

from __future__ import annotations

import math

MAX_TOKEN_COUNT = 2**53 - 1
NOT_A_COUNT = f"is not a token count (a whole number from 0 to {MAX_TOKEN_COUNT})"
"""How a warning says what is wrong with an ignored value."""


def token_count(value: object) -> int | None:
    """`value` as a token count; None when it is none (see the module docstring)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            return None
        value = int(value)
    return value if 0 <= value <= MAX_TOKEN_COUNT else None


__all__ = ["MAX_TOKEN_COUNT", "NOT_A_COUNT", "token_count"]
