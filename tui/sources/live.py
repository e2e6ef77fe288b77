"""The dashboard's view of a live `osmosis-tui eval` run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path

from core.eval import EvalPlan, EvalSession, EvalSummary
from core.eval.attach.endpoint import ControlEndpoint
from core.eval.compare.baseline import Baseline, BaselineCounts
from core.eval.cost.spend import Spend
from core.eval.dispatch_gate import DispatchState
from core.eval.event_silence import EventSilence
from core.eval.reporter import RunReport
from core.eval.results.metrics import Progress
from core.eval.results.records import ItemKey, ItemResult
from core.eval.servers.pool import shown_state
from core.eval.session import REFUSED_AT_START
from core.rollout_record import RequestOptions
from tui.sources.base import STARTING, NewRollout, RunEnding, ServerView, slot_view, step_view
from tui.sources.pass_rule import PassRule


class LiveSource:
    """Runs an `EvalSession` for the dashboard and adds rollouts typed in by hand.

    The session runs in a task of its own, not in the dashboard's worker: however the app
    ends, the run ends its own way (`close`), with its results written."""

    def __init__(
        self,
        plan: EvalPlan,
        *,
        rerun: str,
        on_notice: Callable[[str], None] | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        """`rerun` is the command that repeats the run's inputs (for the resume hints);
        `on_notice(message)` hears of the session's notices (a server went down, ...), and
        `on_step(message)` of each start-up step as it begins."""
        self.plan = plan
        self.rerun_command = rerun
        self.session = EvalSession(
            plan, on_start=self._started, on_notice=on_notice, on_step=on_step
        )
        #: Where other dashboards attach to the run (`osmosis-tui attach`).
        self.endpoint = ControlEndpoint(self.session, rerun=rerun)
        self.board = self.session.board
        self.summary: EvalSummary | None = None
        #: Why the run could not start, when that is the user's to fix (the model refused
        #: the preflight, a port given by a flag is taken): the CLI exits 2 with it.
        self.refused: Exception | None = None
        #: Why the run failed as a whole, when it did (it then has no summary).
        self.failure: str | None = None
        self._running: asyncio.Task[None] | None = None
        self._ending: RunEnding | None = None

    @property
    def title(self) -> str:
        return self.plan.run_name

    @property
    def subtitle(self) -> str:
        plan = self.plan
        return (
            f"model {plan.model_label} · dataset {plan.dataset_name} · rollout {plan.rollout_label}"
        )

    @property
    def playback(self) -> None:
        return None

    @property
    def sends_by_hand(self) -> bool:
        return True

    @property
    def is_watch(self) -> bool:
        return False

    @property
    def detaches_on_quit(self) -> bool:
        return False

    @property
    def servers_stop_with_run(self) -> bool:
        return self.plan.mode != "servers"

    @property
    def read_only(self) -> bool:
        return False

    @property
    def finished(self) -> bool:
        return self.summary is not None

    @property
    def ended(self) -> bool:
        """The session is over, its results written (or it failed as a whole)."""
        return self._running is not None and self._running.done()

    @property
    def can_send(self) -> bool:
        # The session closes its HTTP client (and stops an embedded server) when it ends.
        return self.session.runner is not None and not self.ended

    @property
    def ending(self) -> RunEnding | None:
        """What the CLI prints once the dashboard is closed (`RunReport`), in short."""
        if self._ending is None and self.ended:
            summary = self.summary
            if summary is not None:
                report = RunReport.of(summary, self.plan, self.board, self.rerun_command)
                self._ending = RunEnding(
                    report.message(), summary.problem, tuple(report.hints()), summary.complete
                )
            else:
                self._ending = RunEnding(f"the run stopped: {self.failure or 'cancelled'}")
        return self._ending

    @property
    def preview_root(self) -> Path | None:
        # The run folder is opened when the run starts: no previews before.
        folder = self.session.folder
        return None if folder is None else folder.previews_dir

    @property
    def trials_root(self) -> Path | None:
        folder = self.session.folder
        return None if folder is None else folder.trials_dir

    def progress(self) -> Progress:
        return self.session.progress()

    @property
    def pass_rule(self) -> PassRule:
        return PassRule(self.plan.n, self.plan.pass_threshold)

    def carried_results(self) -> Mapping[ItemKey, ItemResult]:
        return self.session.carried_results()

    @property
    def baseline(self) -> Baseline | None:
        return self.plan.baseline

    def baseline_counts(self) -> BaselineCounts | None:
        tally = self.session.baseline_tally
        return None if tally is None else tally.counts()

    def spend(self) -> Spend:
        return self.session.budget.spend()

    async def set_budget(self, usd: float) -> None:
        self.session.budget.set_limit(usd)

    @property
    def event_silence(self) -> EventSilence | None:
        # Once the run is over, what it lacked is said in logs.txt and the event log.
        return None if self.ended else self.session.event_silence()

    def servers(self) -> list[ServerView]:
        pool = self.session.pool
        ended = self.ended
        if pool is None:
            if ended:
                return []
            # While the servers start: the step in progress, and its latest output line.
            step = self.session.startup_step
            if step is None:
                return [STARTING]
            return [step_view(step.doing, step.latest)]
        launched = self.plan.mode != "servers"
        return [
            slot_view(slot, shown_state(slot, run_over=ended, launched=launched), watched=not ended)
            for slot in pool.slots
        ]

    async def run(self) -> None:
        if self._running is None:
            self._running = asyncio.ensure_future(self._run())
        # Shielded: the dashboard's worker is cancelled when the app exits, the run is not
        # (`close` ends it).
        await asyncio.shield(self._running)

    def _started(self, _name: str, _todo: int, _done: int) -> None:
        self.endpoint.open()  # the run folder is open: its control socket goes in it

    async def _run(self) -> None:
        try:
            self.summary = await self.session.run()
        except REFUSED_AT_START as exc:
            self.refused = exc
            self.failure = str(exc)
            raise
        except Exception as exc:
            self.failure = str(exc)
            raise
        finally:
            await self.endpoint.close(self.summary, failure=self.failure)

    async def interrupt(self, *, cancel_in_flight: bool) -> None:
        await self.session.interrupt(cancel_in_flight=cancel_in_flight)

    async def close(self) -> None:
        running = self._running
        if running is None:
            return
        if not running.done():
            await self.session.interrupt(cancel_in_flight=False)
        # A failure was the dashboard's to show, and is kept in `failure` and `refused`.
        with contextlib.suppress(Exception):
            await running

    async def submit(self, rollout: NewRollout) -> str:
        messages = []
        if rollout.system_prompt:
            messages.append({"role": "system", "content": rollout.system_prompt})
        messages.append({"role": "user", "content": rollout.prompt})
        return await self.session.submit(
            RequestOptions(
                initial_messages=tuple(messages),
                chat_completions_url="",  # the runner sends it to the run's model
                label=rollout.label,
                metadata=None,
                grade=rollout.grade,
                agent_timeout_sec=rollout.agent_timeout_sec,
                grader_timeout_sec=rollout.grader_timeout_sec,
            )
        )

    async def rerun(self, rollout_id: str) -> str:
        record = self.board.records[rollout_id]
        options = record.options
        if options is None:
            raise ValueError(f"no request is known for {rollout_id}")
        return await self.session.submit(
            options,
            row_index=record.row_index,
            source_row_index=record.source_row_index,
            rerun_of=rollout_id,
        )

    def dispatch(self) -> DispatchState | None:
        return self.session.control.state()

    async def pause_dispatch(self, paused: bool) -> None:
        if paused:
            self.session.control.pause()
        else:
            self.session.control.resume()

    async def set_max_in_flight(self, limit: int) -> int:
        return self.session.control.set_max_in_flight(limit)

    async def requeue(self, rollout_id: str) -> str:
        return self.session.control.requeue(rollout_id)

    async def drain(self, url: str, *, drained: bool) -> None:
        self.session.control.drain(url, drained=drained)
