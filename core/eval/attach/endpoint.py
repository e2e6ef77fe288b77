"""`ControlEndpoint`: a live run's control socket, served to the dashboards attached to it
(`osmosis-tui attach`), in the protocol of `core.eval.attach.protocol`.

Every `osmosis-tui eval` serves one, headless or not, from the moment its run folder is open
(`open`, called by the front end when the session starts) until the run is over (`close`,
which tells each viewer why it ended). Each viewer gets the board as it is, then its own
change batches (`RolloutBoard.subscribe`: the run's own dashboard keeps its own), a few times
a second while something changes; a slow viewer's batches simply grow, since a feed holds each
changed id once. Its actions go through the run's board (cancel, untrack) and the session's
controls (pause, resume, max-in-flight, requeue), as the run's own dashboard's keys do, so
that its files record them the same way.
A viewer that leaves, or speaks nonsense, loses its connection; the run never notices.
No Textual here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from core.board import ChangeFeed
from core.eval.attach.protocol import (
    ACTIONS,
    HEARTBEAT_SEC,
    MAX_ACTION_IDS,
    MAX_VIEWER_LINE,
    PROTOCOL_VERSION,
    ProtocolViolation,
    decode,
    dispatch_state,
    encode,
    ids_of,
    in_chunks,
    record_state,
    spend_state,
    version_problem,
)
from core.eval.attach.unix_socket import BoundSocket, ControlSocketError, peer_uid
from core.eval.reporter import RunReport
from core.eval.runner import ControlRefused
from core.eval.servers.pool import shown_state
from core.eval.session import EvalSession
from core.eval.summary import EvalSummary
from core.eval.untrusted_json import float_of, int_of, text_of
from core.rollout_record import RolloutRecord

logger = logging.getLogger(__name__)

#: How often a viewer is sent what changed (the dashboard repaints 3 times a second).
CHANGES_INTERVAL_SEC = 0.25
#: How long a new connection may take to say hello (a probe says nothing and hangs up).
HELLO_TIMEOUT_SEC = 10.0
#: How long the end of the run waits for the viewers to be told, before it hangs up on them.
END_TIMEOUT_SEC = 5.0


class ControlEndpoint:
    """The control socket of one run (`session`); `rerun` is the command that repeats the
    run's inputs, for the next steps its end tells the viewers."""

    def __init__(self, session: EvalSession, *, rerun: str) -> None:
        self.session = session
        self.rerun = rerun
        #: The socket's path while it is served.
        self.path: Path | None = None
        self._bound: BoundSocket | None = None
        self._serving: asyncio.Task[asyncio.AbstractServer] | None = None
        self._viewers: set[asyncio.Task[Any]] = set()
        self._acting: set[asyncio.Task[None]] = set()
        self._ending: dict[str, Any] | None = None

    # -- the run's side ----------------------------------------------------------------------

    def open(self) -> Path | None:
        """Bind the socket in the session's run folder and serve it; its path, or None when
        it cannot be (said in a notice: the run goes on, only nobody can attach to it)."""
        folder = self.session.folder
        if folder is None or self._bound is not None:
            return self.path
        try:
            bound = BoundSocket(folder.path)
        except ControlSocketError as exc:
            self.session.notice(f"no dashboard can attach to this run: {exc}")
            return None
        self._bound = bound
        self.path = bound.path
        self._serving = asyncio.ensure_future(
            asyncio.start_unix_server(self._viewer, sock=bound.socket, limit=MAX_VIEWER_LINE)
        )
        return bound.path

    async def close(self, summary: EvalSummary | None, *, failure: str | None = None) -> None:
        """The run is over (with `summary`, or as a whole because of `failure`): each viewer
        gets the last changes and why it ended, then the socket is removed."""
        bound, serving = self._bound, self._serving
        if bound is None or serving is None:
            return
        self._ending = self._ending_of(summary, failure)
        server: asyncio.AbstractServer | None = None
        try:
            server = await serving
            server.close()  # no new viewers
            if self._viewers:
                _done, late = await asyncio.wait(self._viewers, timeout=END_TIMEOUT_SEC)
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)
            for task in self._acting:  # asked for by viewers: the run they act on is over
                task.cancel()
        except Exception:  # the end of the run is not the socket's to spoil
            logger.exception("the control socket did not close cleanly")
        finally:
            bound.close()
            self._bound = None
            self.path = None
            if server is not None:
                await server.wait_closed()

    def _ending_of(self, summary: EvalSummary | None, failure: str | None) -> dict[str, Any]:
        if summary is None:
            return {
                "reason": f"the run stopped: {failure or 'cancelled'}",
                "problem": None,
                "next_steps": [],
                "complete": False,
            }
        session = self.session
        report = RunReport.of(
            summary, session.plan, session.board, self.rerun, session.budget.spend()
        )
        return {
            "reason": report.message(),
            "problem": summary.problem,
            "next_steps": report.hints(),
            "complete": summary.complete,
        }

    # -- what a viewer is told -----------------------------------------------------------------

    def _identity(self) -> dict[str, Any]:
        session, plan = self.session, self.session.plan
        folder = session.folder
        previews = folder.previews_dir if folder is not None else None
        return {
            "name": plan.run_name,
            "model": plan.model_label,
            "dataset": plan.dataset_name,
            "rollout": plan.rollout_label,
            "folder": str(folder.path.absolute()) if folder is not None else None,
            "previews": str(previews.absolute()) if previews is not None else None,
            "local_run_id": folder.local_run_id if folder is not None else None,
            "pid": os.getpid(),
            # The paths and commands of the end's next steps are relative to it.
            "cwd": os.getcwd(),
            "created_at": folder.created_at if folder is not None else None,
            "pass_threshold": plan.pass_threshold,
            # The viewer reads the baseline itself: a million items' outcomes would be
            # megabytes sent to every viewer, where this is one path on the same machine.
            "baseline": None if plan.baseline is None else str(plan.baseline.folder.absolute()),
        }

    def _state(self) -> dict[str, Any]:
        session, board = self.session, self.session.board
        progress = session.progress()
        pool = session.pool
        over = self._ending is not None
        launched = session.plan.mode != "servers"
        servers = [
            {
                "url": slot.url,
                "state": shown_state(slot, run_over=over, launched=launched),
                "restarts": slot.restarts,
                "detail": slot.last_error,
                "watched": not over,
                "launched": launched,
                "capacity": slot.capacity,
                "busy": slot.client.busy_answers,
                "health_ms": None if slot.health_ms is None else round(slot.health_ms, 1),
            }
            for slot in (pool.slots if pool is not None else ())
        ]
        return {
            "progress": {
                "done": progress.done,
                "total": progress.total,
                "passed": progress.passed,
                "completed": progress.completed,
                "mean_reward": progress.mean_reward,
                "rewards_count": progress.rewards_count,
                "in_flight": progress.in_flight,
                "stuck": progress.stuck,
                "overdue": progress.overdue,
                "not_dispatched": progress.not_dispatched,
                "carried": progress.carried,
                "carried_success": progress.carried_success,
                "carried_failures": dict(progress.carried_failures),
            },
            "servers": servers,
            "model": {
                "calls": board.model_calls,
                "tokens": board.total_tokens,
                "cost_usd": board.total_cost_usd,
            },
            "dispatch": dispatch_state(session.control.state()),
            "spend": spend_state(session.budget.spend()),
            **(
                {"baseline": session.baseline_tally.counts().as_json()}
                if session.baseline_tally is not None
                else {}
            ),
        }

    def _elapsed(self) -> float:
        return round(time.monotonic() - self.session.board.started_at, 4)

    # -- one viewer ----------------------------------------------------------------------------

    async def _viewer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._viewers.add(task)
        try:
            await self._talk(reader, writer)
        except (ConnectionError, ProtocolViolation, asyncio.TimeoutError):
            pass  # gone, silent, or speaking nonsense: it is hung up on
        except Exception:
            logger.exception("a dashboard attached to the run failed; it was hung up on")
        finally:
            self._viewers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _talk(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("socket")
        uid = peer_uid(peer) if peer is not None else None
        if uid is not None and uid not in (os.getuid(), 0):
            await self._send(writer, _refused("the run belongs to another user"))
            return
        line = await asyncio.wait_for(_readline(reader), HELLO_TIMEOUT_SEC)
        if not line:
            return  # a probe: is the run alive?
        hello = decode(line)
        problem = (
            version_problem(hello.get("version"))
            if hello.get("type") == "hello"
            else "the first message must be a hello"
        )
        if problem is not None:
            await self._send(writer, _refused(problem))
            return
        await self._send(
            writer, {"type": "hello", "version": PROTOCOL_VERSION, "run": self._identity()}
        )
        board = self.session.board
        feed = board.subscribe()
        try:
            # Taken in the same step as the subscription: whatever changes from here on is in
            # the feed, and goes in a later batch.
            records = list(board.records.values())
            state = self._state()
            await self._snapshot(writer, records, state)
            actions = asyncio.ensure_future(self._take_actions(reader, writer))
            try:
                await self._follow(writer, feed, state, actions)
            finally:
                actions.cancel()
        finally:
            board.unsubscribe(feed)

    async def _snapshot(
        self, writer: asyncio.StreamWriter, records: list[RolloutRecord], state: dict[str, Any]
    ) -> None:
        board = self.session.board
        await self._send(
            writer,
            {
                "type": "snapshot",
                "elapsed": self._elapsed(),
                "stuck_after_sec": board.stuck_after_sec,
                "state": state,
                "records": len(records),
            },
        )
        origin = board.started_at
        # In chunks, so that a big board neither holds the run's loop nor one huge line.
        for chunk in in_chunks(records):
            states = [record_state(record, origin, first=True) for record in chunk]
            await self._send(writer, {"type": "records", "records": states})

    async def _follow(
        self,
        writer: asyncio.StreamWriter,
        feed: ChangeFeed,
        state: dict[str, Any],
        actions: asyncio.Future[None],
    ) -> None:
        """Send what changes until the run ends (then say why) or the viewer leaves."""
        board = self.session.board
        sent_state = encode(state)
        sent_at = time.monotonic()
        while not actions.done():
            ending = self._ending
            batch = feed.take()
            message: dict[str, Any] = {"type": "changes", "elapsed": self._elapsed()}
            # New ones first, in the order the board got them: the viewer's board keeps it.
            added = [rid for rid in batch.added if rid in board.records]
            fresh = set(added)
            changed = [rid for rid in batch.ids if rid not in fresh and rid in board.records]
            origin = board.started_at
            message["records"] = [
                record_state(board.records[rid], origin, first=rid in fresh)
                for rid in (*added, *changed)
            ]
            state = self._state()
            encoded = encode(state)
            if encoded != sent_state:
                message["state"] = state
                sent_state = encoded
            if (
                message["records"]
                or "state" in message
                or time.monotonic() - sent_at >= HEARTBEAT_SEC
            ):
                await self._send(writer, message)
                sent_at = time.monotonic()
            if ending is not None:
                await self._send(writer, {"type": "end", "ending": ending, "state": state})
                return
            await asyncio.sleep(CHANGES_INTERVAL_SEC)

    async def _send(self, writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        writer.write(encode(message))
        await writer.drain()

    # -- a viewer's actions --------------------------------------------------------------------

    async def _take_actions(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Read the viewer's actions until it hangs up; each is answered when it is done (a
        cancel waits for the servers), the others meanwhile."""
        while True:
            try:
                line = await _readline(reader)
            except (ConnectionError, ProtocolViolation):
                return  # gone, or a line past the limit
            if not line.endswith(b"\n"):
                return  # the viewer hung up (mid-line or not)
            task = asyncio.ensure_future(self._act(line, writer))
            # Kept until done: a cancel asked for is carried out even if the viewer leaves.
            self._acting.add(task)
            task.add_done_callback(self._acting.discard)

    async def _act(self, line: bytes, writer: asyncio.StreamWriter) -> None:
        request: object = None
        try:
            message = decode(line)
            request = message.get("request")
            reply = await self._answer(message)
        except ProtocolViolation as exc:
            reply = {"ok": False, "error": str(exc)}
        except Exception as exc:  # an action that failed is answered, never raised into the run
            logger.exception("an action from an attached dashboard failed")
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        with contextlib.suppress(ConnectionError):
            await self._send(writer, {"type": "reply", "request": request, **reply})

    async def _answer(self, message: dict[str, Any]) -> dict[str, Any]:
        action = message.get("action")
        board = self.session.board
        if action in ("cancel", "untrack"):
            ids = ids_of(message.get("ids"))
            if ids is None:
                return {"ok": False, "error": "ids must be a list of rollout ids"}
            if len(ids) > MAX_ACTION_IDS:
                return {
                    "ok": False,
                    "error": f"{action} names {len(ids)} rollout ids; an action names at most "
                    f"{MAX_ACTION_IDS} (send them in pieces)",
                }
            if action == "cancel":
                return {"ok": True, "answers": await board.cancel_on_server(ids)}
            return {"ok": True, "stopped": board.stop_tracking(ids)}
        if action not in ACTIONS:
            return {
                "ok": False,
                "error": f"unknown action {action!r}; a run takes {', '.join(ACTIONS)}",
            }
        try:
            reply = self._steer(action, message)
        except ControlRefused as exc:  # the run cannot do it now: the viewer is told why
            return {"ok": False, "error": str(exc)}
        if reply.get("ok") is True:
            # What the dispatch is after it: the viewer's summary need not wait for the
            # next changes.
            reply["dispatch"] = dispatch_state(self.session.control.state())
        return reply

    def _steer(self, action: object, message: dict[str, Any]) -> dict[str, Any]:
        """Pause, resume, max-in-flight, drain, undrain, the budget or requeue, through the
        session's controls (the run's own dashboard's keys' way: logs.txt and transitions.jsonl
        record them the same)."""
        control = self.session.control
        if action == "pause":
            control.pause()
            return {"ok": True}
        if action == "resume":
            control.resume()
            return {"ok": True}
        if action in ("drain", "undrain"):
            url = text_of(message.get("server"))
            if url is None:
                return {"ok": False, "error": "server must be the URL of a server (a string)"}
            control.drain(url, drained=action == "drain")
            return {"ok": True}
        if action == "budget":
            usd = float_of(message.get("usd"))
            if usd is None or usd < 0:
                got = json.dumps(message.get("usd"))[:40]
                return {
                    "ok": False,
                    "error": f"usd must be a number of dollars, at least 0 (got {got})",
                }
            self.session.budget.set_limit(usd)
            return {"ok": True}
        if action == "max_in_flight":
            limit = int_of(message.get("limit"))
            if limit is None or limit < 1:
                got = json.dumps(message.get("limit"))[:40]
                return {
                    "ok": False,
                    "error": f"limit must be a whole number of work items, at least 1 (got {got})",
                }
            return {"ok": True, "limit": control.set_max_in_flight(limit)}
        # What is left of ACTIONS: requeue.
        rollout_id = text_of(message.get("rollout_id"))
        if rollout_id is None:
            return {"ok": False, "error": "rollout_id must be the id of a rollout (a string)"}
        return {"ok": True, "new_rollout_id": control.requeue(rollout_id)}


async def _readline(reader: asyncio.StreamReader) -> bytes:
    """The viewer's next line (b"" once it hung up); `ProtocolViolation` past the limit."""
    try:
        return await reader.readline()
    except ValueError:  # what readline raises for a line past the reader's limit
        raise ProtocolViolation(f"a line longer than {MAX_VIEWER_LINE} bytes") from None


def _refused(why: str) -> dict[str, Any]:
    return {"type": "refused", "version": PROTOCOL_VERSION, "error": why}


__all__ = ["ControlEndpoint"]
