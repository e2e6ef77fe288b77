"""A footer that keeps the keys that matter most when they do not all fit (DESIGN.md §2).

Textual's footer lays its keys out in a row and lets the row run off the edge: at 80 columns
the last keys (Log, Help, Quit) were gone, and the command palette's key, docked on the
right, left a stray letter of a hidden key beside it. This one drops the least needed keys
first, in the order given, until the rest fit; the keys shown keep their own order.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer

# Not exported by textual.widgets; the version is pinned (constraints.txt).
from textual.widgets._footer import FooterKey


class FittedFooter(Footer):
    """A compact `Footer` showing the keys that fit its width, the most needed first."""

    def __init__(self, priority: Sequence[str], *, id: str | None = None) -> None:
        """`priority`: binding actions, most needed first; a key whose action is not listed
        goes before any that is."""
        super().__init__(id=id, compact=True)
        self._rank = {action: rank for rank, action in enumerate(priority)}
        self._fitted_width = 0

    def compose(self) -> ComposeResult:
        keys = list(super().compose())
        width = self._fitted_width = self.size.width
        shown = set(keys)
        least_needed_last = sorted(keys, key=self._need)
        while width and sum(map(_footprint, shown)) > width:
            shown.discard(least_needed_last.pop())
        yield from (key for key in keys if key in shown)

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._fitted_width:
            self.call_after_refresh(self.recompose)

    def _need(self, widget: Widget) -> int:
        action = widget.action if isinstance(widget, FooterKey) else ""
        return self._rank.get(action, len(self._rank))


def _footprint(widget: Widget) -> int:
    """Columns a key takes in the compact footer: its key and description, a space between
    and one after (the palette's key has its border on the left besides)."""
    if not isinstance(widget, FooterKey):
        return 0  # the dashboard's bindings have no groups, the only other thing a footer holds
    label = widget.key_display + (f" {widget.description}" if widget.description else "")
    border = 1 if widget.has_class("-command-palette") else 0
    return border + cell_len(label) + 1
