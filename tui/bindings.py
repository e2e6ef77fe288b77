"""The dashboard's keys: every binding with its hand-written id and tooltip, which of them
apply to the source and the selected rollout, and how the help lists them (DESIGN.md §2).

The footer shows the everyday keys; the help and the command palette list them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from textual.actions import parse as parse_action
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType

from core.rollout_record import RolloutRecord
from tui.sources.base import DashboardSource
from tui.widgets.format import CHIP_STATUSES
from tui.widgets.table.columns import WATCH_COLUMNS
from tui.widgets.table.sorting import column_keys

# Steering the run: hidden on a replay, which is read-only.
LIVE_ACTIONS = frozenset(
    {
        "cancel_server",
        "untrack",
        "mark",
        "cancel_marked",
        "new_rollout",
        "rerun",
        "requeue",
        "pause_dispatch",
        "max_in_flight",
    }
)
# Playback: only a replay has it.
REPLAY_ACTIONS = frozenset(
    {"pause", "step", "speed", "step_back", "seek", "seek_start", "seek_end"}
)
# Sending rollouts by hand: the run's own dashboard's, hidden on one attached to it from
# another process (tui.sources.attached), which steers the dispatch through the run instead.
OWNER_ACTIONS = frozenset({"new_rollout", "rerun"})
# Steering a run's dispatch: hidden where there is none (a watch sends nothing).
STEERING_ACTIONS = frozenset({"requeue", "pause_dispatch", "max_in_flight", "raise_budget"})

DASHBOARD_BINDINGS: list[BindingType] = [
    Binding(
        "enter",
        "details",
        "Details",
        tooltip="Show everything about the selected rollout",
        id="details.toggle",
    ),
    Binding(
        "t",
        "transcript",
        "Transcript",
        tooltip="The selected rollout's conversation, live or final",
        show=False,
        id="transcript.open",
    ),
    Binding(
        "c",
        "cancel_server",
        "Cancel",
        tooltip="Cancel the selected rollout on its server",
        id="rollout.cancel",
    ),
    Binding(
        "x",
        "untrack",
        "Untrack",
        tooltip="Stop tracking locally; nothing is sent to the server",
        id="rollout.untrack",
    ),
    Binding(
        "space",
        "mark",
        "Mark",
        tooltip="Mark or unmark the selected rollout; the cursor moves down to the next",
        show=False,
        id="rollout.mark",
    ),
    Binding(
        "C",
        "cancel_marked",
        "Cancel marked",
        tooltip="Cancel marked rollouts (or all shown) on the server",
        show=False,
        id="marked.cancel",
    ),
    Binding("n", "new_rollout", "New", tooltip="Submit a new rollout by hand", id="rollout.new"),
    Binding(
        "r",
        "rerun",
        "Re-run",
        tooltip="Run the selected finished rollout again, with a new id",
        id="rollout.rerun",
    ),
    Binding(
        "R",
        "requeue",
        "Requeue",
        tooltip="Cancel the selected (or marked) rollouts, run them again",
        show=False,
        id="rollout.requeue",
    ),
    # Dispatch: `[`/`]`, not `-`/`+`, which are the replay's speed. Pausing the run is what a
    # user means by "pause": the footer offers it, and `p` (freezing the screen) is named so.
    Binding(
        "P",
        "pause_dispatch",
        "Pause run",
        tooltip="Pause or resume the run: no new work item is sent (those in flight go on)",
        id="dispatch.pause",
    ),
    Binding(
        "right_square_bracket",
        "max_in_flight(1)",
        "More in flight",
        tooltip="Raise max-in-flight by one (up to the servers' capacity)",
        show=False,
        id="dispatch.more",
    ),
    Binding(
        "left_square_bracket",
        "max_in_flight(-1)",
        "Fewer in flight",
        tooltip="Lower max-in-flight by one (cancels nothing)",
        show=False,
        id="dispatch.fewer",
    ),
    Binding(
        "dollar_sign",
        "raise_budget",
        "Raise budget",
        tooltip="Raise the run's --budget by a quarter (a pause the budget made resumes "
        "when the projected total is within it)",
        show=False,
        id="dispatch.budget",
    ),
    Binding(
        "slash",
        "filter",
        "Filter",
        tooltip="Filter by text: id, row, status, error, label",
        id="filter.text",
    ),
    Binding(
        "escape",
        "leave_filter",
        "Leave filter",
        tooltip="Leave the filter bar (the filter stays); again: clear the text filter",
        show=False,
        id="filter.leave",
    ),
    # Keys 1 to 6: one status each, in the order of the summary's chips.
    *(
        Binding(
            str(key),
            f"status_filter('{status}')",
            status.capitalize(),
            tooltip=f"Show or hide {status}",
            show=False,
            id=f"filter.{status}",
        )
        for key, status in enumerate(CHIP_STATUSES, start=1)
    ),
    Binding(
        "0", "clear_filters", "All", tooltip="Clear every filter", show=False, id="filter.clear"
    ),
    Binding(
        "exclamation_mark",
        "stuck_only",
        "Stuck",
        tooltip="Show only stuck rollouts",
        show=False,
        id="filter.stuck",
    ),
    Binding(
        "s",
        "sort",
        "Sort",
        tooltip="Sort by the next column (a column's own key jumps to it)",
        id="sort.next",
    ),
    # A capital letter per column, as k9s has: sort by it; pressed again, the other way.
    *(
        Binding(
            key,
            f"sort_by('{column}')",
            f"Sort by {title}",
            tooltip=f"Sort by {title}; again: the other way",
            show=False,
            id=f"sort.{column}",
        )
        for key, column, title in column_keys()
    ),
    Binding(
        "v",
        "server_filter",
        "Server",
        tooltip="Show one server's rollouts, the next server's, then all",
        show=False,
        id="filter.server",
    ),
    Binding(
        "h",
        "distributions",
        "Distributions",
        tooltip="Histograms of phase times, latency, tokens and reward of the rows shown; "
        "a bin filters the table",
        show=False,
        id="distributions.open",
    ),
    Binding(
        "f",
        "follow",
        "Follow",
        tooltip="Follow new rollouts as they come (like tail -f)",
        show=False,
        id="follow.toggle",
    ),
    Binding(
        "y",
        "copy_id",
        "Copy id",
        tooltip="Copy the selected rollout's id to the clipboard",
        show=False,
        id="rollout.copy-id",
    ),
    Binding(
        "d",
        "rollout_view",
        "View",
        tooltip="The selected rollout full screen: details, calls, transcript, JSON",
        show=False,
        id="rollout.view",
    ),
    # One key, two bindings: a live run's `p` freezes the screen (off the footer, which has
    # `P`); a replay's pauses the playback. `check_action` leaves each to its source.
    Binding(
        "p",
        "freeze",
        "Freeze",
        tooltip="Freeze the screen or let it move again; the run goes on meanwhile",
        show=False,
        id="screen.freeze",
    ),
    Binding(
        "p",
        "pause",
        "Pause",
        tooltip="Replay: pause or resume the playback",
        id="pause.toggle",
    ),
    Binding(
        "full_stop",
        "step",
        "Step",
        tooltip="Replay: play one more event while paused",
        id="replay.step",
    ),
    # Going back and seeking are off the footer, which must keep quit and help at 80 columns:
    # the help, the palette and the end of the recording's banner name them.
    Binding(
        "comma",
        "step_back",
        "Back",
        tooltip="Replay: take back the last event played (pauses)",
        show=False,
        id="replay.back",
    ),
    Binding(
        "colon",
        "seek",
        "Seek",
        tooltip="Replay: jump to a time (90, 1m30s or 1:30)",
        show=False,
        id="replay.seek",
    ),
    Binding(
        "less_than_sign",
        "seek_start",
        "Start",
        tooltip="Replay: back to the start of the recording",
        show=False,
        id="replay.start",
    ),
    Binding(
        "greater_than_sign",
        "seek_end",
        "End",
        tooltip="Replay: jump to the end of the recording",
        show=False,
        id="replay.end",
    ),
    Binding("plus", "speed(2.0)", "Faster", tooltip="Replay: play twice as fast", id="speed.up"),
    Binding("minus", "speed(0.5)", "Slower", tooltip="Replay: play half as fast", id="speed.down"),
    Binding(
        "e",
        "export",
        "Export",
        tooltip="Write the shown rows to JSONL and CSV",
        show=False,
        id="export.shown",
    ),
    # `a` for attempts: `g`, the grid's own letter, is the table's first row (as vi's).
    Binding(
        "a",
        "attempt_grid",
        "Attempts grid",
        tooltip="Rows × attempts grid: rows passing only sometimes first",
        show=False,
        id="grid.open",
    ),
    Binding(
        "V",
        "servers",
        "Servers",
        tooltip="Servers panel: state, capacity, in flight, admitted, 429s, failures; d drains",
        show=False,
        id="servers.open",
    ),
    Binding("l", "event_log", "Log", tooltip="Show or hide the event log", id="log.toggle"),
    Binding(
        "w",
        "timeline",
        "Timeline",
        tooltip="The run on a time axis; the table shows what was in flight at its cursor",
        show=False,
        id="timeline.open",
    ),
    Binding(
        "question_mark,f1",
        "help",
        "Help",
        tooltip="All keys and the phase track legend",
        id="help.open",
    ),
    Binding(
        "q",
        "quit_dashboard",
        "Quit",
        tooltip="Quit (asks what to do with rollouts in flight)",
        id="quit.request",
    ),
]

#: The footer's keys, most needed first: where they do not all fit, the last go first, so that
#: quit and help (which lists every key) always show, then the log. The command palette's key
#: is Textual's own.
FOOTER_PRIORITY = (
    "quit_dashboard",
    "help",
    "event_log",
    "details",
    "cancel_server",
    "filter",
    "command_palette",
    "pause_dispatch",
    "pause",
    "step",
    "speed(2.0)",
    "speed(0.5)",
    "untrack",
    "sort",
    "new_rollout",
    "rerun",
)


def action_state(action: str, source: DashboardSource, record: RolloutRecord | None) -> bool | None:
    """What `App.check_action` answers for `action` with `record` selected: None greys a
    binding out (it makes no sense for the selected row); False hides it (it makes no sense
    for this source: steering a replay, playback keys on a live run)."""
    if action in LIVE_ACTIONS and source.read_only:
        return False
    if action == "freeze":
        return source.playback is None
    if action in REPLAY_ACTIONS:
        return source.playback is not None
    if action in OWNER_ACTIONS and not source.sends_by_hand:
        return False
    if action in STEERING_ACTIONS and source.is_watch:
        return False
    if action == "cancel_server":
        return (source.can_send and record is not None and source.board.can_cancel(record)) or None
    if action == "cancel_marked":
        return source.can_send or None
    if action == "untrack":
        return (record is not None and record.in_flight) or None
    if action == "rerun":
        return (source.can_send and record is not None and record.finished and record.asked) or None
    if action == "new_rollout":
        return source.can_send or None
    if action in ("transcript", "copy_id", "rollout_view"):
        return record is not None or None
    if action == "requeue":
        return source.can_send or None  # the flow says which of the rollouts can be
    if action == "raise_budget":
        return (not source.finished and source.spend().budget_usd is not None) or None
    if action in ("pause_dispatch", "max_in_flight"):
        state = source.dispatch()
        if state is None or source.finished:
            return None
        # A pause can be asked for while the servers start; the limit is known once they are up.
        return (action == "pause_dispatch" or state.max_in_flight is not None) or None
    return True


def applicable(app: App[Any]) -> list[Binding]:
    """The dashboard's bindings that apply to the app's source (greyed-out ones included)."""
    return [b for b in DASHBOARD_BINDINGS if isinstance(b, Binding) and _state(app, b) is not False]


def key_states(app: App[Any]) -> tuple[bool | None, ...]:
    """What `check_action` answers for each of the dashboard's bindings, in their order: the
    footer shows the keys as these say (shown, greyed out, hidden)."""
    return tuple(_state(app, b) for b in DASHBOARD_BINDINGS if isinstance(b, Binding))


def keys_shown(app: App[Any], binding: Binding) -> str:
    """A binding's keys as the footer would show them: "?, f1"."""
    return ", ".join(
        app.get_key_display(Binding(key.strip(), binding.action)) for key in binding.key.split(",")
    )


# Families of keys the help lists as one line each: (what they do, then each key's argument).
_FAMILIES = {
    "status_filter": "Show or hide a status: ",
    "sort_by": "Sort by a column (again: the other way): ",
}


def help_lines(app: App[Any], *, watch: bool = False) -> list[tuple[str, str]]:
    """(keys, what they do) for the help screen: each applicable binding, each family of keys
    (the six status toggles, the column sorts) as one line where its first key stands, then
    the cursor keys; a `watch`'s columns by their titles there."""
    bindings = applicable(app)
    families: dict[str, list[Binding]] = {}
    for binding in bindings:
        name = parse_action(binding.action)[1]
        if name in _FAMILIES:
            families.setdefault(name, []).append(binding)
    shown: list[tuple[str, str]] = []
    for binding in bindings:
        name = parse_action(binding.action)[1]
        family = families.get(name)
        if family is None:
            shown.append((keys_shown(app, binding), binding.tooltip or binding.description))
        elif binding is family[0]:
            members = (f"{b.key} {_argument(b, watch=watch)}" for b in family)
            keys = f"{family[0].key} … {family[-1].key}"
            shown.append((keys, _FAMILIES[name] + ", ".join(members)))
    shown += [
        # Two lines: one long key column would squeeze every description at 80 columns.
        ("↑ ↓ pgup pgdn", "Move the cursor a row or a page (also j, k, or a click)"),
        ("home end", "The first or the last rollout (also g, G)"),
        ("^p", "Command palette: every action by name"),
        (
            "in the timeline",
            "← → move in time (shift: a tenth of the window), i o zoom, ^← ^→ pan, z fit; "
            "a replay's enter plays it to there",
        ),
    ]
    return shown


def _argument(binding: Binding, *, watch: bool = False) -> str:
    """A family member's own word: the status it toggles, the column it sorts by (a watch's
    columns by the titles its table gives them)."""
    argument = str(parse_action(binding.action)[2][0])
    shown = WATCH_COLUMNS.get(argument) if watch else None
    return shown.title if shown is not None else argument.replace("_", " ")


def palette_commands(app: App[Any]) -> Iterator[SystemCommand]:
    """The command palette's entries: each binding that can be used right now."""
    for binding in applicable(app):
        if _state(app, binding) is not True:
            continue  # greyed out for the selected row: leave it out of the palette
        action = binding.action
        yield SystemCommand(
            binding.description,
            f"{binding.tooltip} ({keys_shown(app, binding)})",
            lambda action=action: app.run_action(action),
        )


def _state(app: App[Any], binding: Binding) -> bool | None:
    _namespace, name, parameters = parse_action(binding.action)
    return app.check_action(name, parameters)
