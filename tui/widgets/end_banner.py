"""The end banner: once the run is over, why it ended and how to go on, until the app quits
(or a replay goes back from its end)."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from tui.sources.base import RunEnding
from tui.widgets.banner import Banner
from tui.widgets.format import plain


class EndBanner(Banner):
    """Hidden while the run goes on; then the source's `RunEnding`, in full (commands wrap
    rather than being cut: they are meant to be copied)."""

    DEFAULT_CSS = """
    EndBanner.-complete {
        background: $success-muted;
    }
    """

    def show(self, ending: RunEnding) -> None:
        headline = Text(overflow="fold")
        headline.append("■ ", "bold")
        headline.append_text(plain(ending.reason, "bold", wrap=True))
        headline.append("  (q quits)", "dim")
        lines = [headline]
        if ending.problem:
            lines.append(Text.assemble("stopped: ", plain(ending.problem, wrap=True)))
        lines += [plain(step, wrap=True) for step in ending.next_steps]
        self.update(Group(*lines))
        self.set_class(ending.complete, "-complete")
        self.add_class("-shown")
