"""Text from a run made safe inside HTML: escaped, and without the characters that could
reorder or hide what surrounds it (bidi overrides, controls), as on the dashboard."""

from __future__ import annotations

import html

from core.eval.safe_text import replace_unsafe


def text(value: object) -> str:
    """`value` as HTML text or an attribute's value: its line breaks kept (a `pre-wrap` block
    shows them), every other unsafe character replaced (`replace_unsafe`), `<`, `&` and both
    quotes escaped."""
    return "\n".join(
        html.escape(replace_unsafe(line), quote=True) for line in str(value).split("\n")
    )


def number(value: float) -> str:
    """A coordinate in an SVG attribute: two decimals are finer than any screen."""
    return f"{value:.2f}".rstrip("0").rstrip(".")
