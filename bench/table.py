"""The one table `make bench` prints: every figure, ours beside the official one, the target
and whether it holds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """One line of the table; `holds` is None for a figure without a target."""

    name: str
    ours: str
    official: str = ""
    target: str = ""
    holds: bool | None = None


def ratio(ours: float, official: float) -> float:
    return ours / official if official else float("inf")


def ms(value: float) -> str:
    return f"{value:.2f} ms" if abs(value) < 10 else f"{value:.0f} ms"


def verdict(holds: bool | None) -> str:
    return "" if holds is None else ("yes" if holds else "NO")


def format_table(figures: Iterable[Figure]) -> str:
    rows = [("figure", "ours", "official", "target", "holds")]
    rows += [(f.name, f.ours, f.official, f.target, verdict(f.holds)) for f in figures]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


__all__ = ["Figure", "format_table", "ms", "ratio", "verdict"]
