"""Every model call of one rollout that the board keeps, each with its request and reply: the
full view's Model calls tab (`d`); the details pane lists only the latest few."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from core.eval.count_text import compact_count
from core.eval.duration_text import duration
from core.model_activity import MODEL_CALLS_KEPT, ModelActivity, ModelCallReport
from tui.widgets.details import call_status
from tui.widgets.format import money, plain


def model_call_list(activity: ModelActivity, t0: float, now: float) -> RenderableType:
    """The calls, newest first: when, how long, tokens, cost and status, then the texts."""
    waiting = list(activity.in_flight.values())
    calls = [*reversed(waiting), *reversed(activity.recent)]
    if not calls:
        return Text("no model calls (yet)", "dim")
    kept = len(calls)
    heading = f"{activity.calls} call" + ("s" if activity.calls != 1 else "")
    if kept < activity.calls:
        heading += f", the latest {kept} shown (the board keeps {MODEL_CALLS_KEPT})"
    return Group(Text(heading, "bold"), Text(""), *(_call(call, t0, now) for call in calls))


def _call(call: ModelCallReport, t0: float, now: float) -> RenderableType:
    latency = call.latency_sec
    line = Text.assemble(
        (f"#{call.call_id}", "bold"),
        f"  +{call.started_monotonic - t0:.3f}s",
        f"  {'…' if latency is None else duration(latency)}",
        f"  {compact_count(call.total_tokens)} tokens",
        f"  {'-' if call.cost_usd is None else money(call.cost_usd)}  ",
    )
    line.append_text(call_status(call, now))
    parts: list[RenderableType] = [line, _labelled("request", call.request_text or "-")]
    if call.error:
        parts.append(_labelled("error", call.error, "red"))
    elif call.reply_text is not None:
        parts.append(_labelled("reply", call.reply_text))
    parts.append(Text(""))
    return Group(*parts)


def _labelled(label: str, text: str, style: str = "") -> Text:
    # Model text, JSON or not, is shown as it came: text, never markup.
    return Text.assemble((f"{label}: ", "bold"), plain(text, style, wrap=True))
