"""Counts as text: a count of anything (tokens, calls, rollouts) in at most six characters."""

from __future__ import annotations


def compact_count(value: int | None) -> str:
    """`812`, `9,876`, `12.3k`, `4.6M`: at most six characters."""
    if value is None:
        return "-"
    if value < 10_000:
        return f"{value:,}"
    if value < 999_950:  # what would round up to "1000.0k" says "1.0M"
        return f"{value / 1000:.1f}k"
    return f"{value / 1_000_000:.1f}M"


__all__ = ["compact_count"]
