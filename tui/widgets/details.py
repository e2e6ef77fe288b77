"""The details pane: everything known about one rollout, and why it skipped a phase."""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import pairwise

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from core.board import RolloutBoard
from core.eval.count_text import compact_count
from core.eval.duration_text import duration
from core.eval.timing.waterfall import waterfall
from core.model_activity import ModelActivity, ModelCallReport
from core.phases import PHASES, PhaseMark
from core.rollout_record import RolloutRecord
from core.transcript import content_text
from core.types import RolloutStatus
from tui.widgets.format import (
    message_shown,
    money,
    plain,
    reward,
    status_text,
)
from tui.widgets.phase_track import SKIP_EXPLANATIONS, phase_track
from tui.widgets.waterfall import WaterfallChart

MAX_MESSAGE_CHARS = 400
# The model calls listed (the latest); the counts above the list cover every call.
CALLS_LISTED = 12


def _pairs(rows: list[tuple[str, RenderableType]]) -> Table:
    """Key and value rows. A key may be the rollout's (a message's role): drawn through `plain`,
    as a string cell would be read as markup."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(plain(key), value)
    return table


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def _short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + "…"


# Who said so, for a mark that is not a poll's own.
_SOURCE_NAMES = {"server": "server", "model": "from its first model call"}


def _source(mark: PhaseMark) -> str:
    """Who said so: the server or the rollout's first model call (and how much later a poll
    saw it too), or a poll."""
    if mark.source == "poll":
        return "poll"
    said = _SOURCE_NAMES[mark.source]
    if mark.polled_at is None:
        return said
    return f"{said}, poll +{max(0.0, mark.polled_at - mark.at):.3f}s"


def _origin(record: RolloutRecord) -> list[tuple[str, RenderableType]]:
    """Whether the rollout is a work item's attempt that counts: one sent by hand never does,
    a requeued one no longer does; a watch's is none, and whose it is its server's events say."""
    rows: list[tuple[str, RenderableType]] = []
    if record.manual:
        rows.append(
            ("manual", Text("sent by hand: outside the work items, not in the progress", "cyan"))
        )
    reported_by = record.reported_by
    if reported_by is not None:
        # A watch's: whose it is is what its server's events said, and nothing tells its result.
        rows += [
            (name, plain(value, wrap=True))
            for name, value in (
                ("server name", reported_by.server_name),
                ("namespace", reported_by.namespace),
                ("run name", reported_by.run_name),
                ("run id", reported_by.run_id),
            )
            if value is not None
        ]
        rows.append(
            (
                "result",
                Text(
                    "with whoever sent it: ownership events carry statuses, not results",
                    "dim",
                ),
            )
        )
    if record.hedged_with is not None:
        rows.append(
            (
                "hedged",
                Text.assemble(
                    "its work item's other attempt is ",
                    plain(record.hedged_with, "bold"),
                    "; the first of the two to finish is its result",
                    style="yellow",
                ),
            )
        )
    if record.requeued_as is not None:
        rows.append(
            (
                "requeued",
                Text.assemble(
                    "its work item runs again as ",
                    plain(record.requeued_as, "bold"),
                    "; this attempt is not its result",
                    style="yellow",
                ),
            )
        )
    return rows


def describe(record: RolloutRecord, board: RolloutBoard, now: float) -> RenderableType:
    """The whole pane's content for one rollout."""
    result = record.latest_result
    options = record.options
    t0 = board.started_at
    sections: list[RenderableType] = []

    sections.append(
        _pairs(
            [
                ("rollout", plain(record.rollout_id, wrap=True)),
                *(
                    # A watch's rollout is no work item's attempt: it has no row nor try.
                    []
                    if record.reported_by is not None
                    else [
                        (
                            "row / try",
                            Text(
                                f"{_or_dash(record.source_row_index)} / "
                                f"{_or_dash(record.run_index)}"
                            ),
                        )
                    ]
                ),
                ("server", plain(record.server or "-", wrap=True)),
                ("status", status_text(record.display_status)),
                ("phases", phase_track(record)),
            ]
        )
    )
    origin = _origin(record)
    if origin:
        sections.append(_pairs(origin))

    # Three columns, the middle one wrapping: a skipped phase's reason takes the place of
    # its time, so that it stays readable in a narrow pane.
    phases = Table(
        title="phases",
        title_justify="left",
        title_style="bold underline",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    phases.add_column("phase", no_wrap=True)
    phases.add_column("at", ratio=1, overflow="fold")
    phases.add_column("lasted", no_wrap=True, justify="right")
    # A phase lasted until the next one in the lifecycle began.
    timeline = record.timeline()
    next_at = {a.status: b.at for a, b in pairwise(timeline)}
    skipped = record.skipped_phases()
    for phase in (*PHASES, record.status if record.status.is_terminal else None):
        if phase is None:
            continue
        mark = record.marks.get(phase)
        if phase in skipped:  # before the mark: a phase not recorded has a made-up one
            reason = skipped[phase]
            style = "dim" if reason == "not_recorded" else "yellow"
            phases.add_row(Text(phase.value, "dim"), Text(SKIP_EXPLANATIONS[reason], style), "")
        elif mark is not None:
            following = next_at.get(phase)
            lasted = (
                None
                if phase.is_terminal
                else (following if following is not None else now) - mark.at
            )
            current = phase == record.status and not phase.is_terminal and record.in_flight
            phases.add_row(
                phase.value,
                Text.assemble(
                    f"+{mark.at - t0:.3f}s ",
                    # Not recorded: its time is what the run's log or journal says.
                    (_source(mark) if record.phases_recorded else "from the run's files", "dim"),
                    " (current)" if current else "",
                ),
                duration(lasted),
            )
        else:
            phases.add_row(Text(phase.value, "dim"), Text("not yet", "dim"), "")
    sections.append(phases)
    # The waterfall at the pane's width; the full view's tab adds the server's diagnostics.
    # Not for a rollout whose phases no file recorded: the table above says all there is.
    if record.phases_recorded:
        chart = WaterfallChart(waterfall(record, now))
        sections.append(Group(Text("waterfall", "bold underline"), chart))

    if record.model.calls:
        sections.append(_model_calls(record.model, t0, now, record.masked))

    if record.admission_error is not None:
        sections.append(
            _pairs(
                [("not admitted", plain(record.masked(record.admission_error), "red", wrap=True))]
            )
        )

    if result is not None and result.status != RolloutStatus.QUEUED:
        sample = result.sample
        rows: list[tuple[str, RenderableType]] = [
            ("reward", Text(reward(sample.reward if sample else None))),
            (
                "error",
                plain(result.err_category.value, "red") if result.err_category else Text("-"),
            ),
            ("message", plain(_short(result.err_message or "-"), wrap=True)),
        ]
        if sample is not None:
            if sample.remove_sample:
                rows.append(("removed", Text("sample removed: counts as skipped", "yellow")))
            for message in sample.messages[-4:]:
                role = str(message.get("role") or message.get("type") or "?")
                shown = record.masked(message_shown(message))
                rows.append((role, plain(_short(shown), wrap=True)))
            if sample.metrics:
                metrics = record.masked(json.dumps(sample.metrics, default=str))
                rows.append(("metrics", plain(metrics, wrap=True)))
        sections.append(Group(Text("result", "bold underline"), _pairs(rows)))

    if options is not None:
        prompt = message_shown(options.initial_messages[-1]) if options.initial_messages else ""
        sections.append(
            Group(
                Text("request", "bold underline"),
                _pairs(
                    [
                        ("prompt", plain(_short(record.masked(prompt)), wrap=True)),
                        (
                            "label",
                            plain(
                                record.masked(options.label) if options.label is not None else "-",
                                wrap=True,
                            ),
                        ),
                        ("grade", Text(str(options.grade).lower())),
                        ("agent timeout", Text(duration(options.agent_timeout_sec))),
                        ("grader timeout", Text(duration(options.grader_timeout_sec))),
                        (
                            "metadata",
                            plain(
                                _short(record.masked(json.dumps(options.metadata, default=str))),
                                wrap=True,
                            ),
                        ),
                    ]
                ),
            )
        )

    cancel_rows: list[tuple[str, RenderableType]] = []
    for cancel in record.cancels:
        answer = cancel.disposition or (f"failed: {cancel.error}" if cancel.error else "waiting…")
        ended = f", ended +{cancel.answered_at - t0:.3f}s" if cancel.answered_at else ""
        cancel_rows.append(
            (f"+{cancel.requested_at - t0:.3f}s", plain(record.masked(answer) + ended, wrap=True))
        )
    if record.untracked:
        cancel_rows.append(
            ("local", Text("stopped tracking; the server keeps it until its lease ends"))
        )
    if cancel_rows:
        sections.append(Group(Text("cancel history", "bold underline"), _pairs(cancel_rows)))

    health: list[tuple[str, RenderableType]] = [
        ("polls", Text(f"{record.polls} ok, {record.poll_retries} retried")),
        (
            "poll error",
            plain(record.poll_error or "-", "red" if record.poll_error else "", wrap=True),
        ),
    ]
    handle = record.handle
    if record.untracked:
        # Nobody renews it any more: whatever the last renewal said is no longer ours to show.
        health.append(("lease", Text("not renewed (untracked)", "dim")))
    elif handle is not None and not record.finished:
        left = handle.lease.remaining(now)
        health.append(("lease", Text(f"{duration(left)} left" if left > 0 else "expired")))
    if handle is not None or record.polls or record.poll_error:  # not for replays
        sections.append(Group(Text("polling", "bold underline"), _pairs(health)))
    return Group(*[Group(section, Text("")) for section in sections])


def call_status(call: ModelCallReport, now: float) -> Text:
    """A call's status: waiting (for how long), 200, abandoned, or the status it failed with."""
    if call.ended_monotonic is None:
        return Text(f"waiting {duration(now - call.started_monotonic)}", "cyan")
    if call.status == 200:
        return Text("200", "green")
    if call.status is None:
        return Text("abandoned", "yellow")
    return Text(str(call.status), "red")


def _model_calls(
    activity: ModelActivity, t0: float, now: float, masked: Callable[[str], str]
) -> RenderableType:
    """The rollout's model calls: counts and sums, the latest calls, the last exchange (its
    texts `masked`: the gateway redacts them, a recording may not have)."""
    summary = f"{activity.calls} call" + ("s" if activity.calls > 1 else "")
    if activity.failed:
        summary += f", {activity.failed} failed"
    summary += f" · {compact_count(activity.tokens)} tokens"
    if activity.cost_usd is not None:
        summary += f" · {money(activity.cost_usd)}"
    calls = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left")
    calls.add_column("started", no_wrap=True)
    calls.add_column("latency", no_wrap=True, justify="right")
    calls.add_column("tokens", no_wrap=True, justify="right")
    calls.add_column("status", ratio=1, overflow="fold")
    # Read once: a finished rollout's calls are read back from the spill file.
    recent = activity.recent
    listed = [*recent, *activity.in_flight.values()][-CALLS_LISTED:]
    for call in listed:
        latency = call.latency_sec
        calls.add_row(
            f"+{call.started_monotonic - t0:.3f}s",
            "…" if latency is None else duration(latency),
            compact_count(call.total_tokens),
            call_status(call, now),
        )
    rows: list[tuple[str, RenderableType]] = []
    latest = activity.latest()
    if latest is not None:
        request = masked(content_text(latest.request_text) or "-")
        rows.append(("last request", plain(_short(request), wrap=True)))
    replied = recent[-1] if recent else None
    if replied is not None:
        # Model text is shown as text, never markup (message parts: their text, not JSON).
        if replied.status == 200:
            reply = masked(content_text(replied.reply_text) or "-")
            rows.append(("last reply", plain(_short(reply), wrap=True)))
        else:
            rows.append(
                ("last error", plain(_short(masked(replied.error or "-")), "red", wrap=True))
            )
    return Group(
        Text("model calls", "bold underline"),
        Text(summary),
        calls,
        _pairs(rows),
    )


class DetailsPane(VerticalScroll):
    """Shows one rollout; hidden until `enter` picks one."""

    DEFAULT_CSS = """
    DetailsPane {
        width: 40%;
        min-width: 36;  /* at 80 columns the table keeps its row, id, status and phases */
        max-width: 72;
        scrollbar-size-vertical: 1;
        border-left: tall $accent;
        padding: 0 1;
        display: none;
    }
    DetailsPane.-open {
        display: block;
    }
    """

    body: Static
    """What the pane shows; `show` fills it."""

    def compose(self):  # type: ignore[no-untyped-def]
        # Kept, not queried for: the once-a-second refresh of an open pane can come while the
        # app closes, after the body has been removed, and then fills a widget nobody sees.
        self.body = Static(id="details-body")
        yield self.body

    def show(self, record: RolloutRecord | None, board: RolloutBoard, now: float) -> None:
        body = self.body
        if record is None:
            body.update(Text("no rollout selected", "dim"))
        else:
            body.update(describe(record, board, now))
