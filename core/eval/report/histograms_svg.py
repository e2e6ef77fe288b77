"""The distributions as inline SVG histograms, one card per metric: each phase, the total,
model-call latency, tokens and reward (`core.eval.timing.distributions`), with the p50, p95 and
p99 marked on each and written under it. At most `BINS` bars a card, however many rollouts."""

from __future__ import annotations

from collections.abc import Iterable

from core.eval.report.markup import number, text
from core.eval.timing.distributions import (
    METRICS,
    Distribution,
    bin_label,
    distribution,
    value_text,
)
from core.rollout_record import RolloutRecord

BINS = 20
WIDTH = 320.0
HEIGHT = 162.0
LEFT = 8.0
PLOT = WIDTH - 2 * LEFT
TOP = 34.0  # room for the percentiles' labels, one above the other
BARS = 96.0


def histograms(records: Iterable[RolloutRecord]) -> str:
    """A card per metric; a metric without values says so instead of a picture."""
    kept = list(records)
    cards = "".join(_card(distribution(metric, kept, BINS)) for metric in METRICS)
    return f'<div class="cards">{cards}</div>'


def _card(shown: Distribution) -> str:
    metric = shown.metric
    head = f"<h3>{text(metric.title)}</h3>"
    if not shown.count:
        return (
            f'<div class="card empty" data-metric="{text(metric.key)}">{head}'
            '<p class="note">no values</p></div>'
        )
    figures = " · ".join(
        f"p{q} {text(value_text(metric, value))}" for q, value in shown.percentiles
    )
    return (
        f'<div class="card" data-metric="{text(metric.key)}" data-count="{shown.count}">{head}'
        f"{_svg(shown)}"
        f'<p class="figures">{figures} · n {shown.count:,}</p></div>'
    )


def _svg(shown: Distribution) -> str:
    metric = shown.metric
    bins = shown.bins
    low, high = bins[0].low, bins[-1].high
    span = high - low
    most = max(found.count for found in bins)
    slot = PLOT / len(bins)
    base = TOP + BARS
    parts = [
        f'<svg class="histogram" viewBox="0 0 {number(WIDTH)} {number(HEIGHT)}" role="img" '
        f'aria-label="{text(metric.title)}" xmlns="http://www.w3.org/2000/svg">',
        f'<line class="axis" x1="{number(LEFT)}" y1="{number(base)}" '
        f'x2="{number(LEFT + PLOT)}" y2="{number(base)}"/>',
    ]
    for index, found in enumerate(bins):
        height = found.count / most * BARS
        if not found.count:
            continue
        parts.append(
            f'<rect class="bar" data-count="{found.count}" x="{number(LEFT + index * slot + 1)}" '
            f'y="{number(base - height)}" width="{number(max(slot - 2, 1.0))}" '
            f'height="{number(height)}"><title>{text(bin_label(metric, found))}: '
            f"{found.count:,}</title></rect>"
        )
    for row, (q, value) in enumerate(shown.percentiles):
        x = LEFT + (PLOT / 2 if span <= 0 else (value - low) / span * PLOT)
        label_y = 10 + row * 10  # one above the other: p95 and p99 are often close
        near_end = x > LEFT + PLOT - 30
        parts.append(
            f'<line class="percentile" x1="{number(x)}" y1="{number(label_y - 8)}" '
            f'x2="{number(x)}" y2="{number(base)}"><title>p{q} '
            f"{text(value_text(metric, value))}</title></line>"
            f'<text class="percentile{" end" if near_end else ""}" '
            f'x="{number(x - 3 if near_end else x + 3)}" y="{number(label_y)}">p{q}</text>'
        )
    parts.append(
        f'<text class="edge" x="{number(LEFT)}" y="{number(base + 16)}">'
        f"{text(value_text(metric, low))}</text>"
        f'<text class="edge end" x="{number(LEFT + PLOT)}" y="{number(base + 16)}">'
        f"{text(value_text(metric, high))}</text></svg>"
    )
    return "".join(parts)
