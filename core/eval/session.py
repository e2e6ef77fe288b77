"""One `osmosis-tui eval` run, from a checked plan to its results folder (EVAL.md).

Shared by every front end: `EvalSession.run()` starts or reaches the servers, runs what is
pending, and writes the results. Front ends watch the session's board and its events; they
never talk HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import ChainMap
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from core.board import RolloutBoard
from core.eval.compare.baseline import BaselineTally
from core.eval.cost.spend import RunBudget, spent_before
from core.eval.dispatch_gate import within_capacity
from core.eval.errors import InputError
from core.eval.event_silence import EVENTS_GRACE_SEC, EventSilence
from core.eval.events.receiver import EventReceiverError
from core.eval.gateway.errors import GatewayError
from core.eval.gateway.model_gateway import ModelGateway
from core.eval.hedging import TailRules
from core.eval.plan.prepare import EvalPlan, kept_results
from core.eval.redact import Redactor
from core.eval.results.calls import CallLog
from core.eval.results.durable import describe_os_error
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
from core.eval.servers.fd_budget import DescriptorBudget
from core.eval.servers.pool import AllServersDown, ServerPool
from core.eval.startup import RunServices, StartupStep
from core.eval.steering import RunControl
from core.eval.summary import EvalSummary
from core.rollout_record import RequestOptions
from core.spill_file import SpillFile
from core.task_end import cancel_and_wait
from core.types import OTLP_ENDPOINT_ENV, PREVIEW_ROOT_ENV

logger = logging.getLogger(__name__)

#: Bad input found once the run began, before any rollout was sent: the model refused the
#: preflight, a port given by a flag is in use (an `InputError` naming it), LiteLLM is missing.
#: The command exits 2 with it, and a run folder this invocation created is removed again.
REFUSED_AT_START = (InputError, GatewayError, EventReceiverError)

# How often a `--server` run looks whether its servers' events are missing (`EventSilence`).
EVENTS_CHECK_SEC = 1.0


class EvalSession:
    """Runs one prepared plan. `interrupt()` may be called at any time from the same loop."""

    def __init__(
        self,
        plan: EvalPlan,
        *,
        on_start: Callable[[str, int, int], None] | None = None,
        on_result: Callable[[ItemResult], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        """`on_step(message)` hears of each start-up step as it begins (uv sync, the server's
        start, ...): what a front end shows while no rollout runs yet."""
        self.plan = plan
        self.redactor = Redactor(
            [plan.request.llm_api_key, plan.request.server_api_key, *plan.secrets.values()]
        )
        #: Pause and resume dispatch, max-in-flight, requeue: the front end's controls, each
        #: recorded in logs.txt and transitions.jsonl.
        #: What the board and the controls report, in transitions.jsonl once the folder is open.
        self._recorder = TransitionRecorder()
        self.control = RunControl(self._recorder)
        #: The run's spend and `--budget`: it pauses and stops the dispatch through `control`.
        self.budget = RunBudget(
            plan.request.budget_usd,
            before_usd=0.0,
            session_spent=lambda: self.board.total_cost_usd,
            progress=self.progress,
            control=self.control,
            recorder=self._recorder,
        )
        # Set when the spend reached the budget: the run stopped, what is left stays pending.
        self._budget_stop: str | None = None
        # Through `_redact`: the redactor learns the gateway's bearer once it exists.
        self.board = RolloutBoard(
            stuck_after_sec=plan.request.stuck_after_sec,
            redact=self._redact,
            on_transition=self._recorder.status,
            on_cancel=self.control.cancelled,
            on_untrack=self.control.untracked,
            on_not_admitted=self._recorder.not_admitted,
        )
        self.on_start = on_start or (lambda _name, _todo, _done: None)
        self.on_result = on_result or (lambda _result: None)
        self.on_notice = on_notice or (lambda _message: None)
        self.on_step = on_step
        self.folder: RunFolder | None = None
        self.total_to_run = 0
        #: The finished work items: those from before (a resume) and those of this run.
        self.results: dict[ItemKey, ItemResult] = {}
        #: Of those from before, the ones kept (not run again) that this run has not finished
        #: again, and those run again (`--retry-failed`) that it has not finished yet: the
        #: progress counts the first as done before this session, the second as not done.
        self._carried: set[ItemKey] = set()
        self._retried: set[ItemKey] = set()
        #: With `--baseline`: the finished items counted against it (those carried over
        #: from before included, as the progress counts them), as they finish.
        self.baseline_tally = BaselineTally(plan.baseline) if plan.baseline is not None else None
        self._runner: EvalRunner | None = None
        self._interrupt: bool | None = None  # requested before the runner existed: cancel?
        self._startup: asyncio.Future[tuple[ModelGateway, ServerPool]] | None = None
        self._log: RunLog | None = None
        self._call_log: CallLog | None = None
        # Set when a finished item could not be journaled (a full or read-only disk).
        self._write_problem: str | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._lock: RunLock | None = None
        #: The gateway, the event receiver and the servers, once their start-up began.
        self._services: RunServices | None = None

    @property
    def runner(self) -> EvalRunner | None:
        return self._runner

    @property
    def pool(self) -> ServerPool | None:
        """The run's servers, once they were all reached."""
        return None if self._services is None else self._services.pool

    @property
    def startup_step(self) -> StartupStep | None:
        """The start-up step in progress and its latest output line; None before the start-up
        and once the servers are up."""
        return None if self._services is None else self._services.step

    @property
    def gateway(self) -> ModelGateway | None:
        """The run's model gateway, once it listens."""
        return None if self._services is None else self._services.gateway

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

    def carried_results(self) -> dict[ItemKey, ItemResult]:
        """The results from before this invocation that it keeps (a resume): on no board of
        this session's, and done all the same (`progress` counts them)."""
        return {key: self.results[key] for key in self._carried}

    def progress(self) -> Progress:
        """How far the run is, counted as its metrics.json will count it, and what is left."""
        runner = self._runner
        # An item run again is not done until it finishes again (its old result is replaced).
        results = [r for key, r in self.results.items() if key not in self._retried]
        carried = [self.results[key] for key in self._carried]
        if runner is None:  # nothing was sent yet: every item without a result waits
            return progress(
                results,
                total_items=len(self.plan.items),
                pass_threshold=self.plan.pass_threshold,
                carried=carried,
            )
        now = time.monotonic()
        # Only the stuck rollouts are looked at; those sent by hand are no work items.
        stuck = {rid for rid in self.board.stuck_ids(now) if rid in runner.in_flight}
        return progress(
            results,
            total_items=len(self.plan.items),
            pass_threshold=self.plan.pass_threshold,
            carried=carried,
            in_flight=runner.items_in_flight(),
            stuck=len(stuck),
            overdue=len(stuck.union(runner.overdue(now))),
            not_dispatched=runner.items_waiting(),
        )

    def event_silence(self, now: float | None = None) -> EventSilence | None:
        """The `--server` servers that have sent this run no ownership event since they
        admitted its first rollout (`EVENTS_GRACE_SEC` ago), with the settings that end it;
        None when there are none (launched servers get the settings themselves)."""
        services, pool = self._services, self.pool
        if self.plan.mode != "servers" or services is None or pool is None:
            return None
        silent = pool.silent(time.monotonic() if now is None else now, EVENTS_GRACE_SEC)
        if not silent or not services.feeds:
            return None
        return EventSilence(
            servers=tuple(silent),
            endpoint=services.feeds[OTLP_ENDPOINT_ENV],
            preview_root=services.feeds[PREVIEW_ROOT_ENV],
            port_fixed=self.plan.request.events_port is not None,
        )

    async def _say_event_silence(self) -> None:
        """Once the servers are found silent: said once, in logs.txt and to the front end
        (the dashboard also shows it on screen while it holds, from `event_silence`)."""
        # Polled, not awaited: the silence is the absence of an event, a time that passes.
        while True:
            await asyncio.sleep(EVENTS_CHECK_SEC)
            silence = self.event_silence()
            if silence is not None:
                self.notice(silence.message())
                return

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
        try:
            return await self._run_in(folder, started_wall, started)
        except REFUSED_AT_START:
            if self._runner is None and not folder.resumed:
                # Nothing was sent: the folder holds nothing a resume could use, and a run
                # listed `incomplete 0/N` would only mislead. A resumed folder is kept.
                self._discard(folder)
            raise

    def _discard(self, folder: RunFolder) -> None:
        try:
            folder.discard()
        except OSError as exc:  # what refused the run is the news; this is said besides
            logger.warning("could not remove %s: %s", folder.path, describe_os_error(exc))
        else:
            self.folder = None

    async def _run_in(
        self, folder: RunFolder, started_wall: datetime, started: float
    ) -> EvalSummary:
        plan, request = self.plan, self.plan.request
        async with AsyncExitStack() as stack:
            try:
                log = stack.enter_context(RunLog(folder.logs_path, self.redactor))
                self._log = log
                stack.enter_context(run_logging(log))
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
                # Finished rollouts' results, read back when the details or an export ask.
                self.board.spill = SpillFile(folder.path)
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
            self._carried = set(kept)
            self._retried = set(done) - self._carried
            if self.baseline_tally is not None:
                for key in self._carried:
                    self.baseline_tally.add(done[key])
            results = self.results = dict(done)
            # What the results files hold: this run's results and those outside its plan.
            on_file = ChainMap(results, outside)
            self.on_start(plan.run_name, len(todo), recorded)
            self._recorder.record_to(transitions)
            self.control.record_to(log)
            self.budget.before_usd = spent_before(folder.calls_path)
            self.budget.record_to(log)

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
                if self.baseline_tally is not None:
                    self.baseline_tally.add(result)
                self._carried.discard(result.key)
                self._retried.discard(result.key)
                resumed.discard(result.key)
                snapshots.item_finished(result, on_file, resumed)
                self.budget.check()
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
            elif self._budget_stop is not None:
                status = "incomplete"  # not the user's interrupt: exit 1, resumable
                problem = self._budget_stop
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

    def _stop_at_budget(self, message: str) -> None:
        """The spend reached `--budget`: no new item, what is in flight cancelled (it would
        spend more), and everything left pending for a resume."""
        self._budget_stop = message
        self.notice(message)
        runner = self._runner
        if runner is not None and self._stopping is None:
            runner.stop_dispatch(message)
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
        log, calls = self._log, self._call_log
        assert log is not None and calls is not None
        services = self._services = RunServices(
            plan,
            self.board,
            log,
            calls,
            redact=self._redact,
            mask=self._mask,
            notice=self.notice,
            tell=lambda message: self.on_notice(self.redactor.redact(message)),
            on_step=self.on_step,
            on_call_end=self.budget.check,
        )
        startup = asyncio.ensure_future(services.start(stack, folder))
        self._startup = startup
        try:
            gateway, pool = await startup
        except asyncio.CancelledError:
            if self._interrupt is None:
                raise
            return "interrupted", None
        except REFUSED_AT_START as exc:
            logger.error("%s", exc)
            raise
        except AllServersDown as exc:
            return "incomplete", str(exc)
        except Exception as exc:  # a server that could not start: the run cannot begin
            return "incomplete", self.redactor.redact(str(exc))
        descriptors = services.descriptors
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
        # A limit nobody asked for is the servers' capacity, and follows it as they come and go.
        asked = plan.request.max_in_flight is not None or plan.batch_size is not None
        self.control.steer(runner, follows_capacity=not asked)
        self.budget.stop_with(self._stop_at_budget)
        self.budget.check()  # a resume whose earlier sessions spent the budget stops here
        pool.on_servers_changed = self.control.capacity_changed
        if self._interrupt is not None:  # came after the startup had ended, before this line
            await runner.interrupt(cancel_in_flight=self._interrupt)
        silence = asyncio.ensure_future(self._say_event_silence())
        rules = TailRules(
            runner, self.control, plan.request.hedge_after, plan.request.requeue_stuck
        )
        tail = asyncio.ensure_future(rules.run()) if rules.active else None
        try:
            outcome = await runner.run()
        finally:
            await cancel_and_wait(silence)
            if tail is not None:
                await cancel_and_wait(tail)
        return outcome.status, outcome.problem

    def _mask(self, secrets: list[str]) -> None:
        self.redactor = self.redactor.with_secrets(secrets)
        assert self._log is not None
        self._log.redactor = self.redactor

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
            tail=None if self._runner is None else self._runner.hedges.counts(),
        )


@contextlib.contextmanager
def run_logging(log: RunLog) -> Iterator[None]:
    """Send this process's log records to the run's logs.txt (and nowhere else) for the run."""
    root = logging.getLogger()
    handler = log.handler(logging.INFO)
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # One line per HTTP request would drown the log and cost CPU on the hot path; LiteLLM
    # says a line or two per model call at INFO ("LiteLLM completion() model= ..."), which
    # the headless front end would stream to stderr with the run's own lines.
    noisy = ("httpx", "httpcore", "uvicorn.access", "LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
    quiet = [logging.getLogger(name) for name in noisy]
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
