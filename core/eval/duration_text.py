"""A duration as every front end writes it: the dashboard's cells, the end-of-run table, `runs`."""

from __future__ import annotations

import math


def duration(seconds: float | None) -> str:
    """`0.4s`, `9.9s`, `10s`, `59s`, `1m00s`, `3m05s`, `1h02m`: compact and monotone in width.

    Rounded (half up) to the unit shown, then placed by the rounded value: 9.97 s is `10s`
    and 59.6 s is `1m00s`, never `10.0s` or `60s`.
    """
    if seconds is None:
        return "-"
    seconds = max(seconds, 0.0)
    tenths = math.floor(seconds * 10 + 0.5)
    if tenths < 100:
        return f"{tenths / 10:.1f}s"
    whole = math.floor(seconds + 0.5)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        minutes, secs = divmod(whole, 60)
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(math.floor(seconds / 60 + 0.5), 60)
    return f"{hours}h{minutes:02d}m"


__all__ = ["duration"]
