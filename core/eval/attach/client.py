"""`ControlClient`: a dashboard's end of a live run's control socket (`osmosis-tui attach`).

It says hello, rebuilds the run's board in a `RolloutBoard` of its own from the snapshot and
keeps it up to date from the change batches (`core.eval.attach.mirror`), keeps the run's
progress, servers and dispatch as the run reports them, and sends the viewer's actions
(`core.eval.attach.protocol`). Each record's `client` is this client: a cancel from the
dashboard's keys goes to the run, which asks the server; an untrack does too (the board's
untrack hook). Pausing, max-in-flight and requeues are the run's to carry out too, and each
answer brings the dispatch as it left it. No Textual here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.board import RolloutBoard
from core.eval.attach import unix_socket
from core.eval.attach.mirror import BoardMirror
from core.eval.attach.protocol import (
    MAX_RUN_LINE,
    PROTOCOL_VERSION,
    SILENT_AFTER_SEC,
    ProtocolViolation,
    decode,
    dict_of,
    dispatch_from,
    encode,
    ids_of,
    list_of,
    spend_from,
    version_problem,
)
from core.eval.attach.unix_socket import ControlError
from core.eval.compare.baseline import BaselineCounts
from core.eval.cost.spend import Spend
from core.eval.dispatch_gate import DispatchState
from core.eval.results.metrics import Progress
from core.eval.safe_text import replace_unsafe
from core.eval.untrusted_json import bool_of, float_of, int_of, text_of
from core.rollout_record import RolloutRecord
from core.types import CancelRolloutsResponse, failure_category

logger = logging.getLogger(__name__)

#: How long the run may take to answer the hello and send its snapshot's header.
HELLO_TIMEOUT_SEC = 10.0


class ControlUnavailable(ControlError):
    """No live run serves this folder's control socket (none there, or a stale one)."""


class ViewerRefused(ControlError):
    """The run refused this viewer (another protocol version)."""


class ControlLost(ControlError):
    """The connection to the run ended before the run did (its process is gone)."""


class ControlActionError(ControlError):
    """The run could not do what was asked (the message is its answer)."""


@dataclass(frozen=True)
class AttachedRun:
    """Who the run is, as its hello says."""

    name: str
    model: str
    dataset: str
    rollout: str
    folder: Path
    previews: Path | None
    pid: int | None
    local_run_id: str | None
    created_at: str | None
    #: The run's working directory: where its next steps' commands and paths hold.
    cwd: Path | None
    #: The run's pass threshold (None from a run that did not say).
    pass_threshold: float | None = None
    #: The folder of the run it is compared with (`--baseline`), if any.
    baseline: Path | None = None


@dataclass(frozen=True)
class RunEnd:
    """Why the run ended and how to go on: what its own end banner says."""

    reason: str
    problem: str | None
    next_steps: tuple[str, ...]
    complete: bool


@dataclass(frozen=True)
class ServerState:
    url: str
    state: str
    restarts: int
    detail: str | None
    watched: bool
    #: The run started it (the demo's, a workspace's): it stops with the run's process.
    launched: bool = False
    capacity: int | None = None
    busy: int = 0
    health_ms: float | None = None

    def orphaned(self) -> ServerState:
        """As it is once the run's process is gone without a word: nobody watches it any
        more, and one the run launched went with it (its lifeline, EVAL.md §5)."""
        return replace(self, state="stopped" if self.launched else self.state, watched=False)


def _progress(state: dict[str, Any]) -> Progress:
    def count(key: str) -> int:
        return int_of(state.get(key)) or 0

    return Progress(
        done=count("done"),
        total=count("total"),
        passed=count("passed"),
        completed=count("completed"),
        mean_reward=float_of(state.get("mean_reward")),
        rewards_count=count("rewards_count"),
        in_flight=count("in_flight"),
        stuck=count("stuck"),
        overdue=count("overdue"),
        not_dispatched=count("not_dispatched"),
        carried=count("carried"),
        carried_success=count("carried_success"),
        carried_failures=_carried_failures(state.get("carried_failures")),
    )


def _baseline_counts(state: dict[str, Any]) -> BaselineCounts:
    counted = {name: int_of(state.get(name)) for name in BaselineCounts.__dataclass_fields__}
    return BaselineCounts(**{name: max(count or 0, 0) for name, count in counted.items()})


def _carried_failures(value: object) -> dict[str, int]:
    """Counts per failure category; a name that is none (nor `other`) is left out, so what
    reaches the screen is one of the names the dashboard itself counts by."""
    failures: dict[str, int] = {}
    for name, count in dict_of(value).items():
        number = int_of(count)
        if failure_category(name) == name and number is not None and number > 0:
            failures[name] = number
    return failures


class ControlClient:
    """Attached to one live run: its board, as this process sees it, and its actions."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, run: AttachedRun
    ) -> None:
        self.run = run
        self.board = RolloutBoard(on_untrack=self._untracked)
        self.mirror = BoardMirror(self.board, self)
        self.progress = Progress(0, 0, 0, 0, None, 0)
        self.servers: list[ServerState] = []
        #: The run's dispatch, the latest it reported (its state, or the answer to an action
        #: from here); None until it reports one.
        self.dispatch: DispatchState | None = None
        #: The run's spend and budget as it last reported them (None: it reports none).
        self.spend: Spend | None = None
        #: With a baseline: the run's tally against it, as it last reported it.
        self.baseline_counts: BaselineCounts | None = None
        #: Once the run has said it is over: why, and how to go on.
        self.ending: RunEnd | None = None
        #: Why the connection ended before the run said it was over, if it did.
        self.lost: str | None = None
        self._reader = reader
        self._writer = writer
        self._requests: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next_request = 0
        self._forwarding: set[asyncio.Task[Any]] = set()
        self._detached = False
        #: When the run last said anything (this process's clock): it says something at
        #: least every `HEARTBEAT_SEC` while it is live.
        self.heard_at = time.monotonic()

    # -- connecting ----------------------------------------------------------------------------

    @classmethod
    async def connect(cls, folder: Path) -> ControlClient:
        """Attach to the run whose folder is `folder`: the hello, then the whole snapshot.

        `ControlUnavailable` when nothing serves it, `ViewerRefused` when the run refuses
        this viewer, `ControlLost` when it hangs up meanwhile."""
        try:
            sock = unix_socket.connect(folder)
        except FileNotFoundError:
            raise ControlUnavailable(
                f"{folder}: no control socket, so no live run: it has ended (or it is not a "
                "run folder)"
            ) from None
        except ConnectionRefusedError:
            raise ControlUnavailable(
                f"{folder}: nothing answers on its control socket: the run that left it died"
            ) from None
        except OSError as exc:
            raise ControlUnavailable(f"{folder}: cannot reach its control socket: {exc}") from None
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_RUN_LINE)
        try:
            writer.write(encode({"type": "hello", "version": PROTOCOL_VERSION}))
            hello, snapshot = await asyncio.wait_for(_greeted(reader), HELLO_TIMEOUT_SEC)
            client = cls(reader, writer, _identity(dict_of(hello.get("run")), folder))
            client._start(snapshot)
            expected = int_of(snapshot.get("records")) or 0
            received = 0
            while received < expected:
                message = await _read(reader)
                records = list_of(message.get("records"))
                client.mirror.apply(records)
                received += len(records)
        except asyncio.TimeoutError:
            writer.close()
            raise ControlLost("the run did not answer the hello in time") from None
        except BaseException:
            writer.close()
            raise
        return client

    def _start(self, snapshot: dict[str, Any]) -> None:
        self.mirror.start(float_of(snapshot.get("elapsed")) or 0.0)
        self.board.stuck_after_sec = float_of(snapshot.get("stuck_after_sec"))
        self._apply_state(dict_of(snapshot.get("state")))

    # -- following -----------------------------------------------------------------------------

    def silent_for(self) -> float | None:
        """How long the live run has said nothing, once that is longer than its heartbeats
        allow (`SILENT_AFTER_SEC`: stopped, or its loop blocked); None while it talks or once
        it is over."""
        quiet = time.monotonic() - self.heard_at
        return quiet if quiet >= SILENT_AFTER_SEC and not self.over else None

    @property
    def over(self) -> bool:
        """The run has ended, or the connection to it has."""
        return self.ending is not None or self.lost is not None

    async def follow(self) -> None:
        """Apply what the run sends until it is over (`ending`) or the connection ends
        (`lost`)."""
        try:
            while self.ending is None:
                try:
                    message = await _read(self._reader)
                except ControlLost as exc:
                    if not self._detached:  # hanging up ourselves loses nothing
                        self.lost = str(exc)
                        self.servers = [server.orphaned() for server in self.servers]
                    return
                self.heard_at = time.monotonic()
                kind = message.get("type")
                if kind in ("changes", "records", "end"):
                    self.mirror.apply(list_of(message.get("records")))
                    if "state" in message:
                        self._apply_state(dict_of(message.get("state")))
                if kind == "reply":
                    self._answered(message)
                elif kind == "end":
                    self.ending = _ending(dict_of(message.get("ending")))
        finally:
            self._over()

    def _over(self) -> None:
        """Nothing can be sent any more: no record can be cancelled from here."""
        for request in self._requests.values():
            if not request.done():
                request.set_exception(ControlLost("the run is over"))
        self._requests.clear()
        self.mirror.cut_off()

    def _apply_state(self, state: dict[str, Any]) -> None:
        if "progress" in state:
            self.progress = _progress(dict_of(state.get("progress")))
        if "servers" in state:
            self.servers = [
                ServerState(
                    url=text_of(server.get("url")) or "?",
                    state=text_of(server.get("state")) or "?",
                    restarts=int_of(server.get("restarts")) or 0,
                    detail=text_of(server.get("detail")),
                    watched=bool_of(server.get("watched")) is not False,
                    launched=bool_of(server.get("launched")) is True,
                    capacity=int_of(server.get("capacity")),
                    busy=int_of(server.get("busy")) or 0,
                    health_ms=float_of(server.get("health_ms")),
                )
                for server in map(dict_of, list_of(state.get("servers")))
            ]
        if "dispatch" in state:
            self.dispatch = dispatch_from(state.get("dispatch"))
        if "spend" in state:
            self.spend = spend_from(state.get("spend"))
        if "baseline" in state:
            self.baseline_counts = _baseline_counts(dict_of(state.get("baseline")))
        model = dict_of(state.get("model"))
        if model:
            self.board.model_calls = int_of(model.get("calls")) or 0
            self.board.total_tokens = int_of(model.get("tokens")) or 0
            self.board.total_cost_usd = float_of(model.get("cost_usd"))

    # -- the board -----------------------------------------------------------------------------

    # -- actions -------------------------------------------------------------------------------

    async def _request(self, action: str, **fields: Any) -> dict[str, Any]:
        """Ask the run for `action` and wait for its answer (`ControlActionError` when it
        could not, `ControlLost` when it is over before it answers)."""
        if self.over:
            raise ControlLost("the run is over: nothing can be sent to it")
        self._next_request += 1
        number = self._next_request
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._requests[number] = answer
        try:
            self._writer.write(encode({"action": action, "request": number, **fields}))
            await self._writer.drain()
            reply = await answer
        except ConnectionError as exc:
            raise ControlLost(f"the connection to the run ended: {exc}") from None
        finally:
            self._requests.pop(number, None)
        if reply.get("ok") is not True:
            raise ControlActionError(
                replace_unsafe(text_of(reply.get("error")) or "the run refused")
            )
        return reply

    def _answered(self, reply: dict[str, Any]) -> None:
        number = int_of(reply.get("request"))
        answer = self._requests.get(number) if number is not None else None
        if answer is not None and not answer.done():
            if "dispatch" in reply:
                # Taken here, in the order the run sent it: a later state wins over it.
                self.dispatch = dispatch_from(reply.get("dispatch"))
            answer.set_result(reply)

    async def cancel(self, ids: list[str]) -> dict[str, str]:
        """Have the run cancel these rollouts on their servers: per id it sent a cancel for,
        the server's disposition or `error: ...`."""
        answers = dict_of((await self._request("cancel", ids=ids)).get("answers"))
        return {key: value for key, value in answers.items() if isinstance(value, str)}

    async def cancel_rollout(self, rollout_id: str) -> CancelRolloutsResponse:
        """One rollout's cancel, as a `RolloutClient` answers it (the records' `client`).

        A rollout the run had already seen end gets `not_found`, as from its server."""
        answer = (await self.cancel([rollout_id])).get(rollout_id, "not_found")
        if answer.startswith("error: "):
            raise ControlActionError(answer.removeprefix("error: "))
        return CancelRolloutsResponse(dispositions={rollout_id: answer})

    async def untrack(self, ids: list[str]) -> list[str]:
        """Have the run stop following these rollouts; the ids it was still following."""
        stopped = ids_of((await self._request("untrack", ids=ids)).get("stopped"))
        return stopped or []

    async def pause(self) -> None:
        """Have the run send no new work item (those in flight go on)."""
        await self._request("pause")

    async def resume(self) -> None:
        await self._request("resume")

    async def set_budget(self, usd: float) -> None:
        """Have the run take `usd` as its budget."""
        await self._request("budget", usd=usd)

    async def set_max_in_flight(self, limit: int) -> int:
        """Have the run keep up to `limit` work items in flight; the limit it set (within its
        servers' capacity)."""
        reply = await self._request("max_in_flight", limit=limit)
        limit_set = int_of(reply.get("limit"))
        if limit_set is None:
            raise ProtocolViolation("the run's answer to max_in_flight has no limit")
        return limit_set

    async def drain(self, url: str, *, drained: bool) -> None:
        """Have the run send the server at `url` no new work item (`drained`), or send it
        work again."""
        await self._request("drain" if drained else "undrain", server=url)

    async def requeue(self, rollout_id: str) -> str:
        """Have the run cancel a work item's rollout on its server and run the item again;
        the new id."""
        reply = await self._request("requeue", rollout_id=rollout_id)
        new_id = text_of(reply.get("new_rollout_id"))
        if new_id is None:
            raise ProtocolViolation("the run's answer to requeue has no new_rollout_id")
        return new_id

    def _untracked(self, record: RolloutRecord) -> None:
        """The board's untrack hook: the dashboard's `x` is the run's to carry out."""
        if self.mirror.applying or self.over:
            return
        task = asyncio.ensure_future(self.untrack([record.rollout_id]))
        self._forwarding.add(task)
        task.add_done_callback(self._forwarded)

    def _forwarded(self, task: asyncio.Task[Any]) -> None:
        self._forwarding.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("the run did not stop tracking a rollout: %s", task.exception())

    async def close(self) -> None:
        """Detach: the run goes on."""
        self._detached = True
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()


async def _greeted(reader: asyncio.StreamReader) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's hello, and its snapshot's header (`ViewerRefused` when it refuses)."""
    hello = await _read(reader)
    if hello.get("type") == "refused":
        # The run's own words, shown on a terminal: no character of them may steer it.
        raise ViewerRefused(
            f"the run refused: {replace_unsafe(text_of(hello.get('error')) or '?')}"
        )
    problem = version_problem(hello.get("version"))
    if hello.get("type") != "hello" or problem is not None:
        raise ViewerRefused(problem or "the run did not say hello")
    snapshot = await _read(reader)
    if snapshot.get("type") != "snapshot":
        raise ControlLost("the run sent no snapshot")
    return hello, snapshot


async def _read(reader: asyncio.StreamReader) -> dict[str, Any]:
    try:
        line = await reader.readline()
    except (ConnectionError, ValueError) as exc:
        raise ControlLost(f"the connection to the run ended: {exc}") from None
    if not line.endswith(b"\n"):
        raise ControlLost("the run hung up")
    return decode(line)


def _identity(run: dict[str, Any], folder: Path) -> AttachedRun:
    previews = text_of(run.get("previews"))
    return AttachedRun(
        name=text_of(run.get("name")) or folder.name,
        model=text_of(run.get("model")) or "?",
        dataset=text_of(run.get("dataset")) or "?",
        rollout=text_of(run.get("rollout")) or "?",
        folder=Path(text_of(run.get("folder")) or folder),
        previews=Path(previews) if previews else None,
        pid=int_of(run.get("pid")),
        local_run_id=text_of(run.get("local_run_id")),
        created_at=text_of(run.get("created_at")),
        cwd=Path(cwd) if (cwd := text_of(run.get("cwd"))) else None,
        pass_threshold=float_of(run.get("pass_threshold")),
        baseline=Path(baseline) if (baseline := text_of(run.get("baseline"))) else None,
    )


def _ending(raw: dict[str, Any]) -> RunEnd:
    return RunEnd(
        reason=text_of(raw.get("reason")) or "the run is over",
        problem=text_of(raw.get("problem")),
        next_steps=tuple(step for step in list_of(raw.get("next_steps")) if isinstance(step, str)),
        complete=bool_of(raw.get("complete")) is True,
    )


__all__ = [
    "AttachedRun",
    "ControlActionError",
    "ControlClient",
    "ControlLost",
    "ControlUnavailable",
    "RunEnd",
    "ServerState",
    "ViewerRefused",
]
