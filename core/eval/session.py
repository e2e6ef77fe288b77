"""One `osmosis-tui eval` run, from a checked plan to its results folder (EVAL.md).

Shared by every front end: `EvalSession.run()` starts or reaches the servers, runs what is
pending, and writes the results. Front ends watch the session's board and its events; they
never talk HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import ChainMap
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import httpx

from core.board import RolloutBoard
from core.eval.dispatch_gate import within_capacity
from core.eval.events.ownership import OwnershipEvent
from core.eval.events.receiver import EventReceiver, EventReceiverError
from core.eval.gateway.errors import GatewayError
from core.eval.gateway.model_gateway import ModelGateway
from core.eval.gateway.upstream_choice import opened_upstream
from core.eval.gateway.upstreams import ChatUpstream, ambient_secret_values, preflight
from core.eval.plan.prepare import EvalPlan, kept_results
from core.eval.redact import Redactor
from core.eval.results.calls import CallLog, ModelCall
from core.eval.results.durable import describe_os_error, make_folders
from core.eval.results.events import Journal
from core.eval.results.folder import RunFolder, RunFolderError
from core.eval.results.lock import RunLock
from core.eval.results.logs import RunLog
from core.eval.results.metrics import Progress, RunIdentity, progress, summarize
from core.eval.results.recorder import TransitionRecorder
from core.eval.results.records import ItemKey, ItemResult, WorkItem, iso_utc
from core.eval.results.snapshots import Snapshots
from core.eval.results.transitions import TransitionLog
from core.eval.runner import EvalRunner, RunSettings, RunStatus
from core.eval.servers.embedded import demo_rollout_server
from core.eval.servers.fd_budget import DescriptorBudget, descriptor_budget
from core.eval.servers.launcher import launched_rollout_server
from core.eval.servers.pool import AllServersDown, ServerPool
from core.eval.steering import RunControl
from core.eval.stopped_together import StoppedTogether
from core.eval.summary import EvalSummary
from core.rollout_record import RequestOptions
from core.task_end import cancel_and_wait
from core.transport import AiohttpTransport
from core.types import OTLP_ENDPOINT_ENV, PREVIEW_ROOT_ENV

logger = logging.getLogger(__name__)


class EvalSession:
    """Runs one prepared plan. `interrupt()` may be called at any time from the same loop."""

    def __init__(
        self,
        plan: EvalPlan,
        *,
        on_start: Callable[[str, int, int], None] | None = None,
        on_result: Callable[[ItemResult], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
    ) -> None:
        self.plan = plan
        self.redactor = Redactor(
            [plan.request.llm_api_key, plan.request.server_api_key, *plan.secrets.values()]
        )
        #: Pause and resume dispatch, max-in-flight, requeue: the front end's controls, each
        #: recorded in logs.txt and transitions.jsonl.
        #: What the board and the controls report, in transitions.jsonl once the folder is open.
        self._recorder = TransitionRecorder()
        self.control = RunControl(self._recorder)
        # Through `_redact`: the redactor learns the gateway's bearer once it exists.
        self.board = RolloutBoard(
            stuck_after_sec=plan.request.stuck_after_sec,
            redact=self._redact,
            on_transition=self._recorder.status,
            on_cancel=self._recorder.cancel,
            on_untrack=self.control.untracked,
            on_not_admitted=self._recorder.not_admitted,
        )
        self.on_start = on_start or (lambda _name, _todo, _done: None)
        self.on_result = on_result or (lambda _result: None)
        self.on_notice = on_notice or (lambda _message: None)
        self.pool: ServerPool | None = None
        self.gateway: ModelGateway | None = None
        self.folder: RunFolder | None = None
        self.total_to_run = 0
        #: The finished work items: those from before (a resume) and those of this run.
        self.results: dict[ItemKey, ItemResult] = {}
        self._runner: EvalRunner | None = None
        self._interrupt: bool | None = None  # requested before the runner existed: cancel?
        self._startup: asyncio.Future[tuple[ModelGateway, ServerPool]] | None = None
        self._log: RunLog | None = None
        self._call_log: CallLog | None = None
        # Set when a finished item could not be journaled (a full or read-only disk).
        self._write_problem: str | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._lock: RunLock | None = None
        # The servers' bearer: the user's, or one of the run's own for the embedded server.
        self._server_api_key = plan.request.server_api_key

    @property
    def runner(self) -> EvalRunner | None:
        return self._runner

    async def interrupt(self, *, cancel_in_flight: bool) -> None:
        """Stop dispatching; cancel in-flight rollouts on their servers (waiting a bounded
        time for them to end), or leave them be. Before the run started: do not start it."""
        if self._runner is None:
            self._interrupt = cancel_in_flight
            if self._startup is not None:
                self._startup.cancel()
            return
        await self._runner.interrupt(cancel_in_flight=cancel_in_flight)

    def _redact(self, text: str) -> str:
        return self.redactor.redact(text)

    async def submit(
        self,
        options: RequestOptions,
        *,
        row_index: int | None = None,
        source_row_index: int | None = None,
        rerun_of: str | None = None,
    ) -> str:
        """Send a rollout outside the work items through the runner's own dispatch (see
        `EvalRunner.submit`), a re-run of `rerun_of` or a new one, recorded as sent by hand;
        returns its id. Before the servers are up there is nowhere to send it:
        `RuntimeError`."""
        if self._runner is None:
            raise RuntimeError("the servers are not ready yet")
        rollout_id = await self._runner.submit(
            options, row_index=row_index, source_row_index=source_row_index
        )
        self.control.sent_by_hand(self.board.records[rollout_id], rerun_of=rerun_of)
        return rollout_id

    def progress(self) -> Progress:
        """How far the run is, counted as its metrics.json will count it, and what is left."""
        runner = self._runner
        if runner is None:  # nothing was sent yet: every item without a result waits
            return progress(
                self.results.values(),
                total_items=len(self.plan.items),
                pass_threshold=self.plan.pass_threshold,
            )
        now = time.monotonic()
        # Only the stuck rollouts are looked at; those sent by hand are no work items.
        stuck = {rid for rid in self.board.stuck_ids(now) if rid in runner.in_flight}
        return progress(
            self.results.values(),
            total_items=len(self.plan.items),
            pass_threshold=self.plan.pass_threshold,
            in_flight=len(runner.in_flight),
            stuck=len(stuck),
            overdue=len(stuck.union(runner.overdue(now))),
            not_dispatched=len(runner.pending),
        )

    def notice(self, message: str) -> None:
        message = self.redactor.redact(message)
        logger.warning("%s", message)
        self.on_notice(message)

    def claim_name(self) -> None:
        """Take the run name's lock now, so that a front end refuses a name in use before it
        shows anything (`RunLocked`); `run()` takes it itself otherwise."""
        if self._lock is None:
            self._lock = RunLock.acquire(self.plan.request.output, self.plan.run_name)

    async def run(self) -> EvalSummary:
        """Run the plan under its name's lock (`RunLocked` when another run holds it)."""
        self.claim_name()
        try:
            return await self._run_locked()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    async def _run_locked(self) -> EvalSummary:
        plan, request = self.plan, self.plan.request
        started_wall = datetime.now(timezone.utc)
        started = time.monotonic()
        folder = RunFolder.open(
            request.output,
            plan.run_name,
            plan.inputs,
            fresh=request.fresh,
            provenance=plan.provenance,
        )
        self.folder = folder
        async with AsyncExitStack() as stack:
            try:
                log = stack.enter_context(RunLog(folder.logs_path, self.redactor))
                self._log = log
                stack.enter_context(_logging_to(log))
                # Read before the journal is opened for appending (which repairs a torn tail).
                loaded = Journal.load_for_plan(
                    folder.events_path,
                    {item.key for item in plan.items},
                    plan=f"{len(plan.rows)} row{'s' if len(plan.rows) != 1 else ''} × n = {plan.n}",
                    on_warning=self.notice,
                )
                done = loaded.planned
                # Records of items outside the plan: in the results files only (as official).
                outside = loaded.outside
                journal = stack.enter_context(
                    Journal.open(folder.events_path, on_warning=self.notice)
                )
                transitions = TransitionLog(folder.transitions_path)
                stack.callback(transitions.close)
                self._call_log = stack.enter_context(
                    CallLog(folder.calls_path, origin=transitions.started_at)
                )
                snapshots = self._snapshots(folder, started_wall)
                # Every result carried over, until this invocation records its item again.
                resumed = set(done) | set(outside)
                snapshots.write(ChainMap(done, outside), resumed)
            except OSError as exc:
                raise RunFolderError(
                    f"cannot write the results in {folder.path}: {describe_os_error(exc)}"
                ) from exc
            kept = kept_results(done, retry_failed=request.retry_failed)
            todo = [item for item in plan.items if item.key not in kept]
            self.total_to_run = len(todo)
            recorded = len(plan.items) - len(todo)
            if todo:
                log.write(
                    f"{plan.run_name}: {len(todo)} of {len(plan.items)} work items pending"
                    + (f", {len(done)} already recorded" if done else "")
                )
            else:
                log.write(
                    f"{plan.run_name}: all {len(plan.items)} work items already have results",
                    step="resume",
                )
            results = self.results = dict(done)
            # What the results files hold: this run's results and those outside its plan.
            on_file = ChainMap(results, outside)
            self.on_start(plan.run_name, len(todo), recorded)
            self._recorder.record_to(transitions)
            self.control.record_to(log)

            def finished(result: ItemResult) -> None:
                if result.error_type is not None:  # a server's error text may quote a key
                    result = replace(result, error_type=self.redactor.redact(result.error_type))
                gateway = self.gateway
                if gateway is not None:
                    # The tokens the gateway counted (the rollout's own metrics when it saw
                    # none); once they are in the result it needs to keep nothing of the
                    # rollout, which is over.
                    counted = gateway.tokens_for(result.rollout_id)
                    if counted is not None:
                        result = replace(result, tokens=counted)
                    gateway.forget(result.rollout_id)
                if self._write_problem is not None:
                    return  # the journal failed before: this item stays pending
                try:
                    journal.append(result)  # first: nothing finished is ever lost
                except OSError as exc:
                    self._journal_failed(folder.events_path, exc)
                    return
                results[result.key] = result
                resumed.discard(result.key)
                snapshots.item_finished(result, on_file, resumed)
                log.write(
                    "work item finished",
                    step="result",
                    details={
                        "reward": result.reward,
                        "rollout_id": result.rollout_id,
                        "row_index": result.row_index,
                        "run_index": result.run_index,
                        "status": result.status,
                    },
                )
                self.on_result(result)

            status: RunStatus = "complete"
            problem: str | None = None
            try:
                if todo:
                    status, problem = await self._run_items(stack, folder, todo, finished)
                if self._stopping is not None:
                    await self._stopping
            except BaseException:
                # A failure of our own, or the task cancelled: what finished is in
                # events.jsonl, and the snapshots say so too (not the last refresh's
                # "running", up to REFRESH_INTERVAL_SEC behind the journal).
                self._write_results(
                    folder,
                    snapshots,
                    results,
                    outside,
                    resumed,
                    status="incomplete",
                    problem=None,
                    started=started,
                )
                raise
            # Nothing is watched once the run is over (its HTTP client closes with it): a
            # rollout still followed (one sent by hand) is left to its lease, not "running".
            self.board.stop_tracking(
                [record.rollout_id for record in self.board if record.in_flight]
            )
            if self._write_problem is not None:
                status = "incomplete"
                problem = self._write_problem
            if status == "complete" and len(results) < len(plan.items):
                status = "incomplete"
        return self._write_results(
            folder,
            snapshots,
            results,
            outside,
            resumed,
            status=status,
            problem=problem,
            started=started,
        )

    def _snapshots(self, folder: RunFolder, started_wall: datetime) -> Snapshots:
        plan = self.plan
        identity = RunIdentity(
            local_run_id=folder.local_run_id,
            run_name=plan.run_name,
            dataset_name=plan.dataset_name,
            model_name=plan.model_name,
            rollout_name=plan.rollout_name,
            started_at=iso_utc(started_wall),
        )
        return Snapshots(
            folder,
            identity,
            pass_threshold=plan.pass_threshold,
            sampled_rows=len(plan.rows),
            n=plan.n,
            total_dataset_rows=len(plan.dataset.rows),
        )

    def _journal_failed(self, path: Path, exc: OSError) -> None:
        """A finished item could not be written: stop the run, keep everything written."""
        self._write_problem = (
            f"cannot write {path.name}: {describe_os_error(exc)}; the run stopped, every item "
            "written before is kept and a resume runs the rest"
        )
        self.notice(self._write_problem)
        runner = self._runner
        if runner is not None:
            runner.stop_dispatch(self._write_problem)
            # What is still in flight could not be recorded either: free the servers of it.
            self._stopping = asyncio.ensure_future(runner.interrupt(cancel_in_flight=True))

    async def _run_items(
        self,
        stack: AsyncExitStack,
        folder: RunFolder,
        todo: list[WorkItem],
        finished: Callable[[ItemResult], None],
    ) -> tuple[RunStatus, str | None]:
        plan = self.plan
        # A task of its own, so that an interrupt can end a slow start (a workspace server
        # may take up to 90 s to become healthy).
        startup = asyncio.ensure_future(self._connect(stack, folder))
        self._startup = startup
        try:
            gateway, pool = await startup
        except asyncio.CancelledError:
            if self._interrupt is None:
                raise
            return "interrupted", None
        except (GatewayError, EventReceiverError) as exc:
            # The model cannot be used, or the gateway's or the receiver's port not bound.
            logger.error("%s", exc)
            raise
        except AllServersDown as exc:
            return "incomplete", str(exc)
        except Exception as exc:  # a server that could not start: the run cannot begin
            return "incomplete", self.redactor.redact(str(exc))
        # The demo's rollout server runs in a process of its own: only the model may be here.
        descriptors = descriptor_budget(model_in_process=plan.upstream.kind == "stub")
        runner = EvalRunner(
            items=todo,
            rows=plan.rows,
            pool=pool,
            board=self.board,
            settings=RunSettings(
                chat_completions_url=gateway.chat_completions_url,
                # Always the run's own bearer: a rollout never sees the model's key, and one
                # that insists on a key (an official server) has one.
                llm_api_key=gateway.api_key,
                concurrency=self._concurrency(pool, descriptors),
                descriptor_ceiling=descriptors.ceiling,
                agent_timeout_sec=plan.agent_timeout_sec,
                grader_timeout_sec=plan.grader_timeout_sec,
            ),
            on_result=finished,
        )
        self._runner = runner
        self.control.steer(runner)
        if self._interrupt is not None:  # came after the startup had ended, before this line
            await runner.interrupt(cancel_in_flight=self._interrupt)
        outcome = await runner.run()
        return outcome.status, outcome.problem

    async def _connect(
        self, stack: AsyncExitStack, folder: RunFolder
    ) -> tuple[ModelGateway, ServerPool]:
        """Start the model gateway and start or reach the servers while the model's preflight
        call is out; the gateway and the pool, every server probed once, once it passed."""
        # For starting a launched server (its health reads bound themselves); the pool's
        # clients make their own connections.
        http = await stack.enter_async_context(
            httpx.AsyncClient(transport=AiohttpTransport(), timeout=httpx.Timeout(30.0, read=None))
        )
        # Before the gateway is started, so that it closes after the gateway has stopped.
        upstream, forwarded = await stack.enter_async_context(
            opened_upstream(self.plan.upstream, api_key=self.plan.request.llm_api_key)
        )
        # Stopped after the servers: an official server's last events are sent as it stops.
        events = await self._start_event_receiver(stack)
        started = await stack.enter_async_context(StoppedTogether())
        # The provider keys (as the environment holds them now) are masked everywhere.
        self._mask([*upstream.secrets, *ambient_secret_values()])
        # A remote model's preflight takes as long as a call; uv sync and a server's start
        # take seconds too. Nothing is sent to a server before the preflight passed, and its
        # failure is the one reported, whatever the launch did meanwhile.
        checked = asyncio.ensure_future(self._preflight(upstream))
        launch: asyncio.Future[tuple[str, ...]] | None = None
        try:
            gateway = await self._start_gateway(started, upstream, forwarded)
            launch = asyncio.ensure_future(
                self._servers(started, folder, http, self._feeds(events, folder))
            )
            await checked
            urls = await launch
        finally:
            # Whichever is still going once the other failed (an error of the one that ended
            # second is not the one the run reports).
            for task in (checked, launch):
                if task is not None:
                    await cancel_and_wait(task)
        self.gateway = gateway
        pool = ServerPool.connect(
            list(urls),
            api_key=self._server_api_key,
            # The pool logs its own events; the front end is told as well.
            on_event=lambda slot, event: self.on_notice(
                self.redactor.redact(f"server {slot.url} {event}")
            ),
        )
        self.pool = pool
        stack.push_async_callback(pool.aclose)
        await pool.probe_all()
        return gateway, pool

    async def _start_event_receiver(self, stack: AsyncExitStack) -> EventReceiver:
        """The receiver of the servers' ownership events (EVAL.md §6): each goes to the
        board, which merges it with what the polls see."""
        board, log = self.board, self._log
        assert log is not None

        def received(event: OwnershipEvent) -> None:
            board.server_mark(event.rollout_id, event.mark())
            record = board.records.get(event.rollout_id)
            if self.pool is not None and record is not None:
                self.pool.heard_from(record.server)

        receiver = EventReceiver(received, port=self.plan.request.events_port or 0)
        await stack.enter_async_context(receiver)
        log.write(f"event receiver on {receiver.endpoint}", step="listener")
        return receiver

    def _feeds(self, events: EventReceiver, folder: RunFolder) -> dict[str, str]:
        """The variables that point a server's feeds (PROTOCOL.md §8) at this run: launched
        servers get them, and a user starting a server of their own is told them."""
        make_folders(folder.previews_dir)
        # Absolute: a launched server runs in its rollout folder, not in our working directory.
        previews = folder.previews_dir.absolute()
        feeds = {OTLP_ENDPOINT_ENV: events.endpoint, PREVIEW_ROOT_ENV: str(previews)}
        if self.plan.mode == "servers":
            settings = " ".join(f"{name}={value}" for name, value in feeds.items())
            self.notice(
                f"for phase times from the server and live transcripts, start it with {settings}"
            )
        return feeds

    def _mask(self, secrets: list[str]) -> None:
        self.redactor = self.redactor.with_secrets(secrets)
        assert self._log is not None
        self._log.redactor = self.redactor

    async def _preflight(self, upstream: ChatUpstream) -> None:
        """One call to the run's model. Raises `PreflightError` when it cannot be used (the
        run stops before any rollout); a passing problem, such as a rate limit, is a notice."""
        assert self._log is not None
        self._log.write(f"model: {self.plan.upstream.describe()}; preflight call", step="preflight")
        warning = await preflight(upstream)  # logged by preflight itself
        if warning is not None:
            self.on_notice(self.redactor.redact(warning))

    async def _start_gateway(
        self, stack: StoppedTogether, upstream: ChatUpstream, forwarded: tuple[str, ...]
    ) -> ModelGateway:
        """The run's gateway in front of its model (`upstream`, its requests given the
        `forwarded` headers). Raises `GatewayError` when its port cannot be bound."""
        request = self.plan.request
        log, calls = self._log, self._call_log
        assert log is not None and calls is not None

        def call_ended(call: ModelCall) -> None:
            # calls.jsonl keeps the call even when the board's hook fails (the gateway logs it).
            try:
                self.board.call_ended(call)
            finally:
                calls.append(call)

        gateway = ModelGateway(
            upstream,
            listener_port=request.listener_port,
            advertise_url=request.advertise_url,
            redact=self._redact,
            on_call_start=self.board.call_started,
            on_call_end=call_ended,
            forward_headers=forwarded,
        )
        self._mask([gateway.api_key])
        await stack.enter_async_context(gateway)
        advertised = f", advertised as {request.advertise_url}" if request.advertise_url else ""
        log.write(f"model gateway on {gateway.base_url}{advertised}", step="listener")
        return gateway

    async def _servers(
        self,
        stack: StoppedTogether,
        folder: RunFolder,
        http: httpx.AsyncClient,
        feeds: dict[str, str],
    ) -> tuple[str, ...]:
        plan, request = self.plan, self.plan.request
        if plan.mode == "servers":
            return request.servers
        log = self._log
        assert log is not None
        if plan.mode == "embedded":
            # A bearer of the run's own: the server listens on loopback, where any local
            # process could otherwise cancel the run's rollouts. Masked like every key.
            key = self._server_api_key = secrets.token_urlsafe(32)
            self._mask([key])
            url = await stack.enter_async_context(
                demo_rollout_server(
                    otlp_endpoint=feeds[OTLP_ENDPOINT_ENV],
                    preview_root=feeds[PREVIEW_ROOT_ENV],
                    api_key=key,
                )
            )
            log.write(f"demo rollout server on {url}", step="listener")
            return (url,)
        config = plan.config
        assert config is not None
        url = await stack.enter_async_context(
            launched_rollout_server(
                workspace=config.workspace,
                rollout=config.rollout,
                entrypoint=config.entrypoint,
                env=config.env,
                # Gathered (file, then environment) and checked when the plan was made.
                secret_values=plan.secrets,
                artifact_root=folder.trials_dir,
                log=lambda step, line: log.write(line, step=step),
                notice=self.notice,
                http_client=http,
                api_key=request.server_api_key,
                port=request.rollout_port,
                feeds=feeds,
            )
        )
        return (url,)

    def _concurrency(self, pool: ServerPool, descriptors: DescriptorBudget) -> int:
        """--max-in-flight, else batch_size, else the servers' capacity, else 1; capped by it,
        and by the rollouts the process has file descriptors for (with a notice)."""
        capacity = pool.advertised_capacity()
        asked = self.plan.request.max_in_flight
        wanted = asked or self.plan.batch_size or capacity or 1
        limit = within_capacity(wanted, capacity)
        ceiling = descriptors.ceiling
        if ceiling is None or limit <= ceiling:
            return limit
        self.notice(
            descriptors.lowered(
                f"--max-in-flight {asked}" if asked else f"{limit} in flight", ceiling
            )
        )
        return ceiling

    def _write_results(
        self,
        folder: RunFolder,
        snapshots: Snapshots,
        results: dict[ItemKey, ItemResult],
        outside: dict[ItemKey, ItemResult],
        resumed: set[ItemKey],
        *,
        status: RunStatus,
        problem: str | None,
        started: float,
    ) -> EvalSummary:
        """The final snapshots, of `results` and the journal's records `outside` the plan
        (as official), and the summary of `results`, this run's work items."""
        plan = self.plan
        duration_ms = (time.monotonic() - started) * 1000.0
        finished = status == "complete"
        on_file = ChainMap(results, outside)
        try:
            summary = snapshots.write(
                on_file,
                resumed,
                state="finished" if finished else "incomplete",
                duration_ms=duration_ms,
                completed_at=iso_utc() if finished else None,
            )
        except OSError as exc:
            # events.jsonl holds every finished item; a resume writes the snapshots again.
            failed = (
                f"cannot write the results snapshots in {folder.path}: {describe_os_error(exc)}; "
                "events.jsonl keeps every finished item and a resume writes them again"
            )
            self.notice(failed)
            problem = failed if problem is None else f"{problem}; {failed}"
            if status == "complete":
                status = "incomplete"
            summary = summarize(
                snapshots.index_rows(on_file, resumed), pass_threshold=plan.pass_threshold
            )
        return EvalSummary(
            run_name=plan.run_name,
            status=status,
            folder=folder.path,
            total_items=len(plan.items),
            results=results,
            metrics=summary,
            duration_ms=int(duration_ms),
            problem=problem,
            resumed=len(resumed - outside.keys()),
        )


@contextlib.contextmanager
def _logging_to(log: RunLog) -> Iterator[None]:
    """Send this process's log records to the run's logs.txt (and nowhere else) for the run."""
    root = logging.getLogger()
    handler = log.handler(logging.INFO)
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # One line per HTTP request would drown the log and cost CPU on the hot path.
    quiet = [logging.getLogger(name) for name in ("httpx", "httpcore", "uvicorn.access")]
    levels = [logger_.level for logger_ in quiet]
    for logger_ in quiet:
        logger_.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)
        for logger_, level in zip(quiet, levels, strict=True):
            logger_.setLevel(level)
