"""A time axis's ticks: a round step between them, for every picture of a run's time line (the
dashboard's timeline, the report's)."""

from __future__ import annotations

import math

#: The round steps, in seconds, a tick may be apart; beyond the last, whole hours.
ROUND_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)


def tick_step(span: float, ticks: float) -> float:
    """The smallest round step that puts at most `ticks` ticks over `span` seconds."""
    wanted = span / max(ticks, 1e-9)
    for step in ROUND_STEPS:
        if step >= wanted:
            return float(step)
    return 3600.0 * math.ceil(wanted / 3600)
