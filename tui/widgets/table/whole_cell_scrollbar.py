"""`WholeCellScrollBarRender`: a scrollbar whose thumb starts and ends on whole cells."""

from __future__ import annotations

from typing import ClassVar

from textual.scrollbar import ScrollBarRender


class WholeCellScrollBarRender(ScrollBarRender):
    """A scrollbar whose thumb starts and ends on whole cells.

    Textual draws a thumb's ends in eighths of a cell (`▁` … `▇`). Over thousands of rows the
    thumb is one cell, drawn as two such halves: a lone `▅` that creeps along the table's
    edge as rows arrive, and reads as a stray glyph, not as a scrollbar.
    """

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * len(ScrollBarRender.VERTICAL_BARS)
