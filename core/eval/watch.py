"""`WatchSession`: every rollout of the rollout servers that send their ownership events here,
whoever submitted them (`osmosis-tui watch`, issue 27).

Nothing is submitted or polled: the session listens for the servers' OTLP/HTTP logs with the
eval's own receiver (`core.eval.events`), and each ownership event puts its rollout on a board
(`RolloutBoard.server_report`) or moves it on, with the server's own time, so the phase track,
the phase times and stuck detection are the server's. The events carry no result, reward or
error: a watched rollout shows what its server reported, and its result is its caller's.

With `--server` URLs the session reads each server's /health (the eval's `ServerPool`) and can
cancel a rollout there: on the server whose /health `instance_id` is the `server_id` that
reported it, else on every known server (a cancel is idempotent, and any other server answers
`not_found`). With an output folder, the session is recorded in its `transitions.jsonl` by the
eval's own writers, so that `osmosis-tui replay` plays it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.board import RolloutBoard
from core.eval.errors import EvalError
from core.eval.events.ownership import OwnershipEvent
from core.eval.events.receiver import EventReceiver
from core.eval.results.folder import TRANSITIONS_FILE
from core.eval.results.recorder import TransitionRecorder
from core.eval.results.transitions import TransitionLog
from core.eval.servers.directory import ServerDirectory
from core.eval.servers.pool import AllServersDown, RolloutServerSlot, ServerPool
from core.reported_by import ReportedBy
from core.types import CancelDisposition, CancelRolloutsResponse

logger = logging.getLogger(__name__)

#: The OTLP/HTTP port, which an OpenTelemetry exporter sends to when told only a host.
OTLP_HTTP_PORT = 4318


class WatchError(EvalError, RuntimeError):
    """The watch could not start (its output folder cannot be written)."""


@dataclass(frozen=True)
class WatchPlan:
    """What a watch listens on, which servers it knows, and where it records."""

    events_port: int = OTLP_HTTP_PORT
    events_host: str = "127.0.0.1"
    """Where the receiver listens: loopback, unless `--events-listen` says beyond it."""
    events_token: str | None = field(default=None, repr=False)
    """The bearer every request to the receiver must carry (required beyond loopback); never
    shown, logged or recorded."""
    servers: tuple[str, ...] = ()
    """`--server` URLs; with `servers_file`, found as an eval finds its servers
    (`core.eval.servers.directory`: a name of several addresses is that many servers)."""
    servers_file: Path | None = None
    server_api_key: str | None = None
    stuck_after_sec: float | None = None
    output: Path | None = None
    """The folder the session is recorded in (its `transitions.jsonl`); None: not recorded."""
    previews: Path | None = None
    """The servers' preview root (`_OSMOSIS_ROLLOUT_PREVIEW_ROOT`), for the transcripts."""


class FleetCanceller:
    """Cancels a watched rollout on the server that reported it, or on every known server
    when none of them is known to be it (`RolloutRecord.client` of a watched rollout).

    `rollout_id` is the rollout's id on its server; the board may know it by another name (see
    `WatchSession.row_id`), which the answer is given under."""

    def __init__(self, slots: list[RolloutServerSlot], server_id: str, rollout_id: str) -> None:
        self._slots = slots
        self._server_id = server_id
        self._rollout_id = rollout_id

    def _targets(self) -> list[RolloutServerSlot]:
        own = [s for s in self._slots if s.instance_id == self._server_id]
        return own or self._slots

    async def cancel_rollout(self, rollout_id: str) -> CancelRolloutsResponse:
        """The first disposition that found the rollout, else `not_found`, under the name it
        was asked by (`rollout_id`, the board's); the first error when no server answered."""
        wire_id = self._rollout_id
        answers = await asyncio.gather(
            *(slot.client.cancel_rollout(wire_id) for slot in self._targets()),
            return_exceptions=True,
        )
        found = CancelDisposition.NOT_FOUND.value
        errors: list[BaseException] = []
        for answer in answers:
            if isinstance(answer, BaseException):
                errors.append(answer)
                continue
            said = answer.dispositions.get(wire_id, found)
            if said != found:
                return CancelRolloutsResponse(dispositions={rollout_id: said})
        if errors and len(errors) == len(answers):
            raise errors[0]
        return CancelRolloutsResponse(dispositions={rollout_id: found})


class WatchSession:
    """Runs a watch until `stop()`: the receiver, the servers' health, the recording."""

    def __init__(self, plan: WatchPlan, *, on_notice: Callable[[str], None] | None = None) -> None:
        """`on_notice(message)` hears of the servers' changes (down, back up, restarted)."""
        self.plan = plan
        self._on_notice = on_notice
        self._recorder = TransitionRecorder()
        self.board = RolloutBoard(
            stuck_after_sec=plan.stuck_after_sec,
            on_transition=self._recorder.status,
            on_cancel=self._recorder.cancel,
            on_untrack=self._recorder.untracked,
        )
        self.receiver = EventReceiver(
            self.heard, host=plan.events_host, port=plan.events_port, token=plan.events_token
        )
        self._directory = (
            ServerDirectory(plan.servers, plan.servers_file)
            if plan.servers or plan.servers_file is not None
            else None
        )
        #: The servers known by URL, once `run` found them.
        self.pool: ServerPool | None = None
        self._log: TransitionLog | None = None
        self._stopped = asyncio.Event()
        self.started = False
        self.ended = False

    @property
    def slots(self) -> list[RolloutServerSlot]:
        return [] if self.pool is None else self.pool.slots

    @property
    def endpoint(self) -> str | None:
        """What servers are started with as `OSMOSIS_ROLLOUT_OTLP_ENDPOINT`: the receiver's
        URL once it listens, before that the one it is to listen on (None for a free port,
        not known until then)."""
        if self.started:
            return self.receiver.endpoint
        plan = self.plan
        host = f"[{plan.events_host}]" if ":" in plan.events_host else plan.events_host
        return f"http://{host}:{plan.events_port}" if plan.events_port else None

    def heard(self, event: OwnershipEvent) -> None:
        """The receiver's hook: one ownership event, onto the board (its row is `row_id`)."""
        reported_by = ReportedBy(
            event.server_id,
            server_name=event.server_name,
            namespace=event.namespace,
            run_id=event.run_id,
            run_name=event.run_name,
        )
        slots = self.slots
        self.board.server_report(
            self.row_id(event),
            event.mark(),
            reported_by,
            canceller=(FleetCanceller(slots, event.server_id, event.rollout_id) if slots else None),
        )

    def row_id(self, event: OwnershipEvent) -> str:
        """The board's id for the event's rollout: its own id, unless another server reported
        that id first; then `<id>@<server_id>`, so that each server's rollout has a row of its
        own (its transcript is not looked up under that name)."""
        record = self.board.records.get(event.rollout_id)
        if record is None or record.server == event.server_id:
            return event.rollout_id
        return f"{event.rollout_id}@{event.server_id}"

    def _server_changed(self, slot: RolloutServerSlot, event: str) -> None:
        if self._on_notice is not None:
            self._on_notice(f"rollout server {slot.url} {event}")

    def open_recording(self) -> None:
        """Create the output folder and start its `transitions.jsonl` (before the receiver
        listens, so that no event goes unrecorded); `WatchError` when it cannot be."""
        output = self.plan.output
        if output is None or self._log is not None:
            return
        try:
            output.mkdir(parents=True, exist_ok=True)
            self._log = TransitionLog(output / TRANSITIONS_FILE)
        except OSError as exc:
            raise WatchError(f"{output}: cannot record the watch there ({exc})") from exc
        self._recorder.record_to(self._log)

    async def run(self) -> None:
        """Listen, and read the servers' health, until `stop()`."""
        self.open_recording()
        watching: asyncio.Task[None] | None = None
        try:
            async with self.receiver:
                self.started = True  # the receiver listens: its endpoint is known
                pool = self.pool = await self._servers()
                if pool is not None:
                    with contextlib.suppress(AllServersDown):  # said by each server's state
                        await pool.probe_all()
                    watching = asyncio.ensure_future(pool.watch())
                await self._stopped.wait()
        finally:
            self.ended = True
            if watching is not None:
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching
            if self.pool is not None:
                await self.pool.aclose()
            self.close_recording()

    async def _servers(self) -> ServerPool | None:
        """The pool of the servers given, followed as their names and file change."""
        directory = self._directory
        if directory is None:
            return None
        return ServerPool.connect(
            await directory.endpoints(),
            api_key=self.plan.server_api_key,
            on_event=self._server_changed,
            directory=directory,
        )

    def close_recording(self) -> None:
        """Write out and close `transitions.jsonl` (done by `run` as it ends; idempotent)."""
        if self._log is not None:
            self._log.close()

    def stop(self) -> None:
        self._stopped.set()


__all__ = ["OTLP_HTTP_PORT", "FleetCanceller", "WatchError", "WatchPlan", "WatchSession"]
