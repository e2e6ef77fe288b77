"""How the status line shows the run's dispatch: paused or not, and in flight of the most
allowed (the `P`, `[` and `]` keys)."""

from __future__ import annotations

from rich.text import Text

from core.eval.dispatch_gate import DispatchState


def dispatch_text(state: DispatchState | None) -> Text:
    """Such as `  dispatch paused (P resumes)  3 in flight, max 8`; empty without a dispatch
    (a replay)."""
    text = Text()
    if state is None:
        return text
    if state.paused:
        text.append("  dispatch paused (P resumes)", "bold yellow")
    if state.max_in_flight is not None:
        text.append(f"  {state.in_flight} in flight, max {state.max_in_flight}")
    return text
