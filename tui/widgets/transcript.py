"""The transcript view: a rollout's conversation, step by step, the latest at the bottom.

Every text comes from the rollout (its model, its tools, its server): it is passed through the
dashboard's redaction hook, bounded, and shown as `Text`, never markup, with the characters
that could steer a terminal replaced (line breaks kept).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from core.eval.duration_text import duration
from core.transcript import ToolCall, ToolResult, Transcript, TranscriptStep
from tui.widgets.format import plain

Redact = Callable[[str], str]

# A step's text shown in full up to this; past it, the rest is counted, not drawn.
MAX_SHOWN_CHARS = 4_000
ROLE_STYLES = {
    "system": "bold",
    "user": "bold cyan",
    "assistant": "bold green",
    "tool": "bold yellow",
}


@dataclass(frozen=True)
class Shown:
    """What the view shows of one rollout: a transcript, or why there is none."""

    rollout_id: str
    transcript: Transcript | None
    #: Why no live preview is read now (with a transcript: why the one shown may be stale).
    problem: str | None = None


def header(shown: Shown, wall_now: float) -> RenderableType:
    """The lines above the steps: whose transcript, where it came from and how old it is,
    whether the server left anything out."""
    lines: list[Text] = [
        Text.assemble(("Transcript of ", "bold"), plain(shown.rollout_id, "bold", wrap=True))
    ]
    transcript = shown.transcript
    if transcript is None:
        lines.append(plain(shown.problem or "no transcript", "dim", wrap=True))
        return Group(*lines)
    facts: list[str] = []
    if transcript.origin == "preview":
        version = transcript.preview_version
        facts.append("live preview" + ("" if version is None else f" v{version}"))
        if transcript.updated_at is not None:
            facts.append(f"updated {duration(wall_now - transcript.updated_at.timestamp())} ago")
    elif transcript.origin == "trajectory":
        facts.append("trajectory the server left")
    else:
        facts.append("final sample")
    if transcript.status is not None:
        facts.append(transcript.status)
    if transcript.turn is not None:
        facts.append(f"turn {transcript.turn}")
    count = len(transcript.steps)
    facts.append(f"{count} step" + ("" if count == 1 else "s"))
    lines.append(plain(" · ".join(facts), wrap=True))
    if transcript.truncated:
        lines.append(
            Text("truncated by the server: older steps or long texts are left out", "yellow")
            if transcript.origin == "preview"
            else Text("older messages or long texts are left out", "yellow")
        )
    if shown.problem is not None:
        lines.append(plain(f"preview not read now: {shown.problem}", "dim", wrap=True))
    return Group(*lines)


def steps(transcript: Transcript, redact: Redact | None) -> RenderableType:
    """Every step of the transcript, oldest first."""
    if not transcript.steps:
        return Text("no messages yet", "dim")
    return Group(
        *(_step(step, position, redact) for position, step in enumerate(transcript.steps, 1))
    )


def _step(step: TranscriptStep, position: int, redact: Redact | None) -> RenderableType:
    number = step.step_id if step.step_id is not None else position
    title = Text.assemble(
        plain(step.role, ROLE_STYLES.get(step.role, "bold")), (f"  #{number}", "dim")
    )
    if step.call_id is not None:
        title.append_text(_safe(f"  answers {step.call_id}", redact, "dim"))
    parts: list[RenderableType] = [title]
    if step.reasoning:
        parts.append(_safe(step.reasoning, redact, "dim italic"))
    if step.text:
        parts.append(_safe(step.text, redact))
    parts.extend(_call(call, redact) for call in step.tool_calls)
    parts.extend(_result(result, redact) for result in step.tool_results)
    parts.append(Text(""))
    return Group(*parts)


def _call(call: ToolCall, redact: Redact | None) -> Text:
    line = Text.assemble(("→ ", "bold yellow"), _safe(call.name, redact, "bold"))
    line.append_text(_safe(f"({call.arguments})", redact))
    if call.call_id is not None:
        line.append_text(_safe(f"  {call.call_id}", redact, "dim"))
    return line


def _result(result: ToolResult, redact: Redact | None) -> Text:
    line = Text("← ", "bold yellow")
    line.append_text(_safe(result.text or "(empty)", redact))
    return line


def _safe(text: str, redact: Redact | None, style: str = "") -> Text:
    """Untrusted text: redacted first (a secret is never cut in two), then bounded, each line
    made safe for the terminal (`plain`)."""
    if redact is not None:
        text = redact(text)
    more = len(text) - MAX_SHOWN_CHARS
    if more > 0:
        text = text[:MAX_SHOWN_CHARS]
    shown = plain(text, style, wrap=True)
    if more > 0:
        shown.append(f"… ({more:,} more characters)", "dim")
    return shown


class TranscriptView(VerticalScroll):
    """The steps of one transcript, scrolled to the latest until the user scrolls up."""

    DEFAULT_CSS = """
    TranscriptView {
        height: 1fr;
        padding: 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="transcript-steps")

    def show(self, body: RenderableType) -> None:
        # Following the latest unless the user scrolled up to read. Not Textual's anchor: it
        # pushes a transcript shorter than the view down to the view's bottom edge.
        following = self.scroll_y >= self.max_scroll_y
        self.query_one("#transcript-steps", Static).update(body)
        if following:
            self.scroll_end(animate=False)
