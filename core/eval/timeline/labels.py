"""What a picture of a run's time line writes beside it, for every picture (the dashboard's
timeline, the report's): the round step between the time axis's ticks, and each server lane's
label."""

from __future__ import annotations

import math
from urllib.parse import urlsplit

#: The round steps, in seconds, a tick may be apart; beyond the last, whole hours.
ROUND_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)


def tick_step(span: float, ticks: float) -> float:
    """The smallest round step that puts at most `ticks` ticks over `span` seconds."""
    wanted = span / max(ticks, 1e-9)
    for step in ROUND_STEPS:
        if step >= wanted:
            return float(step)
    return 3600.0 * math.ceil(wanted / 3600)


def lane_label(lane: str, room: int) -> str:
    """A server's lane in at most `room` characters: the end of its address (a URL's port tells
    the run's servers apart), or its `server_id`."""
    if not lane:
        return "server"
    shown = urlsplit(lane).netloc or lane
    return shown if len(shown) <= room else "…" + shown[-(room - 1) :]
