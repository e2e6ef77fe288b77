"""How the status line shows the run's dispatch: paused or not, and in flight of the most
allowed (the `P`, `[` and `]` keys)."""

from __future__ import annotations

from rich.text import Text

from core.eval.dispatch_gate import DispatchState


def dispatch_text(state: DispatchState | None, *, steerable: bool = True) -> Text:
    """Such as `  dispatch paused (P resumes)  3 in flight, max 8`; empty without a dispatch.
    A replay's (not `steerable`) says what was recorded, without the key."""
    text = Text()
    if state is None:
        return text
    if state.paused:
        text.append("  dispatch paused" + (" (P resumes)" if steerable else ""), "bold yellow")
    if state.max_in_flight is not None:
        text.append(f"  {state.in_flight} in flight, max {state.max_in_flight}")
    return text
