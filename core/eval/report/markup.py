"""Text from a run made safe inside HTML: escaped, and without the characters that could
reorder or hide what surrounds it (bidi overrides, controls), as on the dashboard."""

from __future__ import annotations

import html

from core.eval.safe_text import multi_line


def text(value: object) -> str:
    """`value` as HTML text or an attribute's value: made safe as the dashboard's blocks are
    (`multi_line`: line breaks kept for a `pre-wrap` block, tabs as spaces, every other unsafe
    character replaced), then `<`, `&` and both quotes escaped."""
    return html.escape(multi_line(str(value)), quote=True)


def number(value: float) -> str:
    """A coordinate in an SVG attribute: two decimals are finer than any screen."""
    return f"{value:.2f}".rstrip("0").rstrip(".")
