"""Bars of eighth blocks: a length in cells drawn to an eighth of a cell, for the charts
(the waterfall, the histograms)."""

from __future__ import annotations

#: Eighths of a cell filled from the left, 1 to 8.
LEFT_EIGHTHS = "▏▎▍▌▋▊▉█"


def eighths(fraction: float) -> str:
    """The block that fills `fraction` (0–1) of a cell from the left: at least ▏."""
    return LEFT_EIGHTHS[min(8, max(1, round(fraction * 8))) - 1]


def bar(cells: float) -> str:
    """A bar `cells` long from the left, its end placed to an eighth of a cell; "" for none."""
    if cells <= 0:
        return ""
    whole = int(cells)
    rest = cells - whole
    return "█" * whole + (eighths(rest) if rest >= 1 / 16 else "")
