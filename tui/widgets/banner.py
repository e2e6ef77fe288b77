"""A banner under the header: hidden until it has something to say, then as many lines as that
takes (up to 8), wrapped rather than cut (what banners say holds commands to copy)."""

from __future__ import annotations

from textual.widgets import Static


class Banner(Static):
    """Shown by the `-shown` class; its subclasses say what goes in it."""

    DEFAULT_CSS = """
    Banner {
        display: none;
        height: auto;
        max-height: 8;
        padding: 0 1;
        background: $warning-muted;
        color: $text;
    }
    Banner.-shown {
        display: block;
    }
    """

    def hide(self) -> None:
        """Nothing to say any more (the servers spoke; a replay went back from its end)."""
        self.remove_class("-shown")
