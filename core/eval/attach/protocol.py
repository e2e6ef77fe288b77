"""The control protocol of a live run (`osmosis-tui attach`): what a run and the dashboards
attached to it say to each other over its control socket (`core.eval.attach.unix_socket`).

Newline-delimited JSON, one object a line, UTF-8 (ASCII-escaped). Times are seconds since the
run's board started (`t`); each side maps them onto its own clock. Version 1:

    viewer → run   {"type": "hello", "version": 1}
    run → viewer   {"type": "hello", "version": 1, "run": IDENTITY}
                   or {"type": "refused", "version": 1, "error": "..."}, and the run hangs up
    run → viewer   {"type": "snapshot", "elapsed": t, "stuck_after_sec": s|null,
                    "state": STATE, "records": N}
                   {"type": "records", "records": [RECORD, ...]}  until N records were sent
    run → viewer   {"type": "changes", "elapsed": t, "records": [RECORD, ...], "state": STATE}
                   a few times a second while something changed ("state" only when it did),
                   and at least once every `HEARTBEAT_SEC` (with no records) while nothing
                   did: a viewer that hears nothing for longer knows the run is not answering
    run → viewer   {"type": "end", "ending": ENDING, "state": STATE}: the run is over (after
                   its last changes); the run hangs up

    viewer → run   {"action": NAME, "request": n, ...}; the run answers each with
    run → viewer   {"type": "reply", "request": n, "ok": true, ...}
                   or {"type": "reply", "request": n, "ok": false, "error": "..."}

Actions (`request` is the viewer's number for it, echoed in the reply):

- `cancel` `{"ids": [...]}`: cancel these rollouts on their servers, through the run's board
  (as its own dashboard's `c`), each once however often it is named; the reply's `answers`
  has, per id sent, the server's disposition or `"error: ..."`.
- `untrack` `{"ids": [...]}`: stop following them (nothing sent to a server); the reply's
  `stopped` lists those that were still followed.
- `pause`, `resume`: stop sending new work items (those in flight go on), or send them again;
  the reply's `dispatch` is DISPATCH after it.
- `max_in_flight` `{"limit": n}` (a whole number, at least 1): the most work items in flight
  at once, within the servers' capacity (lowering it cancels nothing); the reply's `limit` is
  the limit set, its `dispatch` DISPATCH after it.
- `budget` `{"usd": x}` (a number, at least 0): the run's new budget, as its own dashboard's
  `$` sets it (additive within version 1).
- `drain`, `undrain` `{"server": url}`: send the server at `url` no new work item (those in
  flight there go on), or send it work again (additive within version 1).
- `requeue` `{"rollout_id": id}`: cancel a work item's rollout on its server and run the item
  again under a new id, the reply's `new_rollout_id` (its `dispatch`: DISPATCH after it).

Each goes through the run's controls, as its own dashboard's keys do, and is recorded in its
logs.txt and transitions.jsonl the same way; what the run cannot do now (a requeue of a
rollout that is no work item in flight, a limit before the servers are up) is answered
`"ok": false` with the reason; so is a `cancel` or `untrack` naming more than `MAX_ACTION_IDS`
ids (an attached dashboard names one rollout an action).

IDENTITY: `name`, `model`, `dataset`, `rollout` (the model and rollout as the run's header
names them: where they are, when that is a URL), `folder` and `previews` (absolute paths, the
latter null without live previews), `local_run_id`, `pid` (the run's process), `created_at`
(the manifest's: ISO 8601 UTC), `cwd` (the run's working directory, absolute: its ENDING's
paths and commands are relative to it; added in version 1, a viewer may find it missing);
`pass_threshold` (the run's) and `baseline` (the `--baseline` run's folder, absolute, or null:
the viewer reads the baseline's outcomes from it itself), both additive within version 1.

STATE: `progress` (`core.eval.results.metrics.Progress`'s fields; `carried_success` and
`carried_failures` (category → count) came within version 1, a viewer that finds none counts
no carried-over result of either), `servers` (`url`, `state`,
`restarts`, `detail`, `watched`, `launched`: the run started it, so it stops with the run's
process; `capacity` (its advertised `max_concurrent`, or null), `busy` (admissions it answered
429) and `health_ms` (its latest /health read's latency, or null), additive within version 1;
`state` is `drained` for a server the operator drained), `model` (the board's `calls`,
`tokens`, `cost_usd`), `dispatch` (DISPATCH).
`dispatch` and `launched` came after the others within version 1: they are additive, a viewer
that does not know them ignores them, one that finds no `dispatch` knows no dispatch, and one
that finds no `launched` takes the server for one the run did not start. With a baseline,
`baseline` (additive too): the run's tally against it, `BaselineCounts.as_json()`. `spend`
(additive): SPEND.

SPEND (`core.eval.cost.spend.Spend`): `spent_usd`, `session_usd`, `projected_usd`,
`budget_usd` (each a number or null) and `state` (`off`, `within`, `paused`: dispatch paused
by the budget, `reached`: the run stopped at it).

DISPATCH (`core.eval.dispatch_gate.DispatchState`): `paused`, `max_in_flight` (null until the
servers are up), `in_flight` (work items), `manual` (rollouts sent by hand so far);
additive within version 1: `hedges_sent`, `hedges_won` (--hedge-after) and `requeued_by_rule`
(--requeue-stuck), 0 when a run sends none.

RECORD, one rollout as the dashboard needs it (`record_state`): `id`, `row`, `run`,
`source_row`, `server`, `submitted` (t), `grade`; `polls` (the statuses its polls observed, in
order, as `[status, t]`) and `server_marks` (the statuses the server reported:
`status`, `t`, `server_time`, `sequence`, `server_id`), from which the phase track's marks are
merged as on the run's board (the server's time wins); `result` (`status`, `reward`,
`err_message`, `err_category`, `removed`) or null; `not_admitted` (why) or null; `cancels`
(`requested`, `disposition`, `error`, `answered`); `untracked`; `cancellable` (the run can ask
its server to cancel it); `polling` (`polls`, `retries`, `error`); `model` (`calls`, `failed`,
`tokens`, `cost_usd`, `last_ended`, `first_started` (when its first call began: it proves
`running` on the viewer's board as on the run's; additive within version 1), and the latest
calls: `call_id`, `started`, `ended`,
`status`, `tokens`, `cost_usd`, `request`, `reply`, `error`); `requeued_as` (the id its work
item runs again under once it was requeued, else null: additive within version 1, as
`dispatch`); `hedged_with` (a hedged item's other attempt, on both, else null: additive
too); and, the first time a viewer is sent the record only, `options` (`label`,
`grade`, `metadata`, the timeouts and the last initial message). Texts are the run's,
already redacted, and cut at `MAX_TEXT_CHARS`.

ENDING: `reason`, `problem` (or null), `next_steps` (commands, each with its purpose),
`complete`: what the run's own end banner says.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from core.eval.attach.unix_socket import ControlError
from core.eval.cost.spend import BUDGET_STATES, Spend
from core.eval.dispatch_gate import DispatchState
from core.eval.untrusted_json import bool_of, float_of, int_of, load_record, text_of
from core.model_activity import ModelActivity
from core.rollout_record import RequestOptions, RolloutRecord

T = TypeVar("T")

PROTOCOL_VERSION = 1

#: Cut longer texts (errors, model requests and replies, prompts) to this many characters.
MAX_TEXT_CHARS = 4000
#: A metadata object is sent only when its JSON is no longer than this.
MAX_METADATA_CHARS = 4000
#: The latest model calls sent per rollout (the details list as many).
MODEL_CALLS_SENT = 12
#: Records per `records` message of a snapshot.
SNAPSHOT_CHUNK = 500
#: The longest line a viewer may send (its actions are small) and a run may send.
MAX_VIEWER_LINE = 1 << 20
MAX_RUN_LINE = 256 << 20

#: The most rollout ids one `cancel` or `untrack` may name: a dashboard's whole selection is
#: seldom more, and each id of a cancel is a request to a server and two journal lines.
MAX_ACTION_IDS = 4096
#: The longest a live run stays silent to its viewers: nothing changing, it still says so this
#: often, so that a viewer hearing nothing for longer can say the run is not answering (stopped
#: with SIGSTOP, or its loop blocked) instead of showing a clock that runs on.
HEARTBEAT_SEC = 1.0
#: How long a viewer hears nothing before it says so: a few heartbeats, so that a busy run's
#: late one is not taken for silence.
SILENT_AFTER_SEC = 4.0
#: The actions a viewer may send.
ACTIONS = (
    "cancel",
    "untrack",
    "requeue",
    "pause",
    "resume",
    "max_in_flight",
    "drain",
    "undrain",
    "budget",
)


class ProtocolViolation(ControlError):
    """A line that is not a message of this protocol."""


def encode(message: dict[str, Any]) -> bytes:
    """One line of the protocol."""
    return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """The message on one line; `ProtocolViolation` when it is none."""
    try:
        message = load_record(line)
    except ValueError as exc:
        raise ProtocolViolation(f"not a JSON line: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolViolation("a message is a JSON object")
    return message


def version_problem(version: object) -> str | None:
    """Why a peer speaking `version` cannot be served; None when it can."""
    if version == PROTOCOL_VERSION:
        return None
    return (
        f"this run speaks control protocol {PROTOCOL_VERSION}, the other side "
        f"{version if isinstance(version, int) else 'an unknown one'}: attach with the "
        "osmosis-tui that runs it"
    )


# -- values ------------------------------------------------------------------------------------


def _t(at: float | None, origin: float) -> float | None:
    return None if at is None else round(at - origin, 4)


def _number(value: float | None) -> float | None:
    """A number JSON can carry (a price nobody knows is no number)."""
    return value if value is not None and math.isfinite(value) else None


def _text(value: str | None) -> str | None:
    if value is None or len(value) <= MAX_TEXT_CHARS:
        return value
    return value[:MAX_TEXT_CHARS] + "…"


def list_of(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def dict_of(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def ids_of(value: object) -> list[str] | None:
    """A list of rollout ids, or None when `value` is not one."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return value


# -- the dispatch ------------------------------------------------------------------------------


def dispatch_state(state: DispatchState) -> dict[str, Any]:
    """`state` as DISPATCH (module docstring)."""
    return {
        "paused": state.paused,
        "max_in_flight": state.max_in_flight,
        "in_flight": state.in_flight,
        "manual": state.manual,
        "hedges_sent": state.hedges_sent,
        "hedges_won": state.hedges_won,
        "requeued_by_rule": state.requeued_by_rule,
    }


def dispatch_from(raw: object) -> DispatchState | None:
    """The dispatch a DISPATCH says; None when `raw` is none (a run that sent no dispatch)."""
    if not isinstance(raw, dict):
        return None
    return DispatchState(
        paused=bool_of(raw.get("paused")) is True,
        max_in_flight=int_of(raw.get("max_in_flight")),
        in_flight=int_of(raw.get("in_flight")) or 0,
        manual=int_of(raw.get("manual")) or 0,
        hedges_sent=int_of(raw.get("hedges_sent")) or 0,
        hedges_won=int_of(raw.get("hedges_won")) or 0,
        requeued_by_rule=int_of(raw.get("requeued_by_rule")) or 0,
    )


def spend_state(spend: Spend) -> dict[str, Any]:
    """`spend` as SPEND (module docstring)."""
    return {
        "spent_usd": _number(spend.spent_usd),
        "session_usd": _number(spend.session_usd),
        "projected_usd": _number(spend.projected_usd),
        "budget_usd": _number(spend.budget_usd),
        "state": spend.state,
    }


def spend_from(raw: object) -> Spend | None:
    """The spend a SPEND says; None when `raw` is none (a run that sent none)."""
    if not isinstance(raw, dict):
        return None
    state = text_of(raw.get("state"))
    return Spend(
        spent_usd=float_of(raw.get("spent_usd")),
        session_usd=float_of(raw.get("session_usd")),
        projected_usd=float_of(raw.get("projected_usd")),
        budget_usd=float_of(raw.get("budget_usd")),
        state=next((known for known in BUDGET_STATES if known == state), "off"),
    )


# -- records -----------------------------------------------------------------------------------


def record_state(record: RolloutRecord, origin: float, *, first: bool) -> dict[str, Any]:
    """`record` as RECORD (module docstring); `origin` is the board's start, and `first` says
    the viewer has not been sent this record before (its request options go with it)."""
    result = record.result_head
    state: dict[str, Any] = {
        "id": record.rollout_id,
        "row": record.row_index,
        "run": record.run_index,
        "source_row": record.source_row_index,
        "server": record.server,
        "submitted": _t(record.submitted_at, origin),
        "grade": record.grade,
        "polls": [[t.status.value, _t(t.at, origin)] for t in record.transitions],
        "server_marks": [
            {
                "status": mark.status.value,
                "t": _t(mark.at, origin),
                "server_time": mark.server_time,
                "sequence": mark.event_sequence,
                "server_id": mark.server_id,
            }
            for mark in record.marks.values()
            if mark.source == "server"
        ],
        "result": None
        if result is None
        else {
            "status": result.status.value,
            "reward": _number(result.reward),
            "err_message": _text(result.err_message),
            "err_category": result.err_category.value if result.err_category else None,
            "removed": result.remove_sample,
        },
        "not_admitted": _text(record.admission_error),
        "cancels": [
            {
                "requested": _t(cancel.requested_at, origin),
                "disposition": cancel.disposition,
                "error": _text(cancel.error),
                "answered": _t(cancel.answered_at, origin),
            }
            for cancel in record.cancels
        ],
        "untracked": record.untracked,
        "cancellable": record.client is not None,
        "polling": {
            "polls": record.polls,
            "retries": record.poll_retries,
            "error": _text(record.poll_error),
        },
        "model": _model_state(record.model, origin),
        "requeued_as": record.requeued_as,
        "hedged_with": record.hedged_with,
    }
    options = record.options if first else None
    if options is not None:
        state["options"] = _options_state(options)
    return state


def _model_state(activity: ModelActivity, origin: float) -> dict[str, Any]:
    # Read once: a finished rollout's calls are read back from the spill file.
    recent = activity.recent
    calls = [*recent, *activity.in_flight.values()][-MODEL_CALLS_SENT:]
    # The texts of the latest request and the latest reply only: what the details show.
    latest = activity.latest()
    replied = recent[-1] if recent else None
    return {
        "calls": activity.calls,
        "failed": activity.failed,
        "tokens": activity.tokens,
        "cost_usd": _number(activity.cost_usd),
        "last_ended": _t(activity.last_ended_at, origin),
        "first_started": _t(activity.first_started_at, origin),
        "recent": [
            {
                "call_id": call.call_id,
                "started": _t(call.started_monotonic, origin),
                "ended": _t(call.ended_monotonic, origin),
                "status": call.status,
                "tokens": call.total_tokens,
                "cost_usd": _number(call.cost_usd),
                "request": _text(call.request_text) if call is latest else None,
                "reply": _text(call.reply_text) if call is replied else None,
                "error": _text(call.error) if call is replied else None,
            }
            for call in calls
        ],
    }


def _options_state(options: RequestOptions) -> dict[str, Any]:
    metadata = options.metadata
    if metadata is not None and len(json.dumps(metadata, default=str)) > MAX_METADATA_CHARS:
        metadata = {"omitted": "too large to send to an attached dashboard"}
    last = options.initial_messages[-1] if options.initial_messages else None
    return {
        "label": _text(options.label),
        "grade": options.grade,
        "metadata": json.loads(json.dumps(metadata, default=str)),
        "agent_timeout_sec": _number(options.agent_timeout_sec),
        "grader_timeout_sec": _number(options.grader_timeout_sec),
        "last_message": None
        if last is None
        else {"role": str(last.get("role", "")), "content": _text(str(last.get("content", "")))},
    }


def options_from(state: dict[str, Any]) -> RequestOptions:
    """The request options a record state carries, as far as a viewer shows them."""
    last = dict_of(state.get("last_message"))
    metadata = state.get("metadata")
    return RequestOptions(
        initial_messages=(
            (
                {
                    "role": text_of(last.get("role")) or "",
                    "content": text_of(last.get("content")) or "",
                },
            )
            if last
            else ()
        ),
        chat_completions_url="",  # the run's, never shown
        label=text_of(state.get("label")),
        metadata=metadata if isinstance(metadata, dict) else None,
        grade=bool_of(state.get("grade")) is not False,
        agent_timeout_sec=float_of(state.get("agent_timeout_sec")),
        grader_timeout_sec=float_of(state.get("grader_timeout_sec")),
    )


def in_chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """`items` in slices of at most `SNAPSHOT_CHUNK` (a snapshot's `records` messages)."""
    for start in range(0, len(items), SNAPSHOT_CHUNK):
        yield items[start : start + SNAPSHOT_CHUNK]


__all__ = [
    "ACTIONS",
    "MAX_ACTION_IDS",
    "MAX_RUN_LINE",
    "MAX_VIEWER_LINE",
    "PROTOCOL_VERSION",
    "ProtocolViolation",
    "decode",
    "dispatch_from",
    "dispatch_state",
    "encode",
    "in_chunks",
    "options_from",
    "record_state",
    "version_problem",
]
