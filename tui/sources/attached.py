"""The dashboard's view of a run that another process runs (`osmosis-tui attach`).

The run is that process's: its own dashboard (or its headless front end) asks what to do when
it is stopped. This one watches it through the run's control socket
(`core.eval.attach.client`), and steers it through the run: cancelling a rollout or no
longer tracking it, pausing and resuming the dispatch, changing max-in-flight and requeueing
ask the run to do it (on its board, through its controls), so that its files record it as if
its own dashboard had. Leaving detaches (the quit flow asks nothing); the run goes on.
Sending rollouts by hand (a new one, a re-run) stays with the process that runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from shlex import quote
from typing import Any

from core.eval.attach.client import ControlClient
from core.eval.compare.baseline import Baseline, BaselineCounts, read_baseline
from core.eval.compare.compared_run import CompareInputError
from core.eval.cost.spend import Spend, board_spend
from core.eval.dispatch_gate import DispatchState
from core.eval.duration_text import duration
from core.eval.results.events import Journal
from core.eval.results.folder import EVENTS_FILE, MANIFEST_FILE, METRICS_FILE, TRIALS_DIR
from core.eval.results.metrics import Progress
from core.eval.results.records import ItemKey, ItemResult
from core.eval.untrusted_json import load_json_file
from tui.sources.base import STARTING, NewRollout, RunEnding, ServerView
from tui.sources.pass_rule import recorded_pass_rule

#: Why sending rollouts by hand is not offered here.
NOT_FROM_HERE = "only the dashboard of the process that runs it can do that"


def _document(path: Path) -> Any:
    """A JSON file of the run's folder; None when it cannot be read (the rule's defaults
    then stand: the grid still shows what passed by the default threshold)."""
    try:
        return load_json_file(path)
    except (OSError, ValueError):
        return None


def _journaled(path: Path) -> dict[ItemKey, ItemResult]:
    """The run's journal as it is now: what it finished before this viewer came (a resumed
    run's earlier invocations too); none when it cannot be read (the run says why)."""
    try:
        return Journal.load(path, on_warning=lambda _warning: None)
    except OSError:
        return {}


class AttachedSource:
    """A live run seen through its control socket (`client`, already attached)."""

    def __init__(self, client: ControlClient) -> None:
        self.client = client
        self.board = client.board
        self._ending: RunEnding | None = None
        folder = client.run.folder
        #: Read once: the run wrote both files when it started. The threshold is the one the
        #: run says it counts with, when it says one (a run of this version always does).
        recorded = recorded_pass_rule(
            _document(folder / METRICS_FILE), _document(folder / MANIFEST_FILE)
        )
        said = client.run.pass_threshold
        self.pass_rule = recorded if said is None else replace(recorded, threshold=said)
        self._carried = _journaled(folder / EVENTS_FILE)
        #: Why the run's baseline could not be read here (then its column is not shown).
        self.baseline_problem: str | None = None
        self._baseline = self._read_baseline()

    def _read_baseline(self) -> Baseline | None:
        """The run's baseline, read from its folder as the run read it (the same user on the
        same machine: the control socket admits no other); its counts come from the run."""
        run = self.client.run
        if run.baseline is None:
            return None
        try:
            return read_baseline(
                run.baseline, label="the baseline", threshold=self.pass_rule.threshold
            )
        except CompareInputError as exc:
            self.baseline_problem = str(exc)
            return None

    @property
    def title(self) -> str:
        return self.client.run.name

    @property
    def subtitle(self) -> str:
        run = self.client.run
        by = f" (process {run.pid})" if run.pid is not None else ""
        described = f"model {run.model} · dataset {run.dataset} · rollout {run.rollout}"
        silent = self.client.silent_for()
        if silent is not None:
            # Its clock here runs on: say that nothing is heard (SIGSTOPped, or blocked).
            return f"attached{by} · no word from the run for {duration(silent)} · {described}"
        return f"attached{by} · {described}"

    @property
    def playback(self) -> None:
        return None

    @property
    def sends_by_hand(self) -> bool:
        return False

    @property
    def is_watch(self) -> bool:
        return False

    @property
    def detaches_on_quit(self) -> bool:
        return True

    @property
    def servers_stop_with_run(self) -> bool:
        return False  # quitting only detaches: the run and its servers go on

    @property
    def read_only(self) -> bool:
        return False

    @property
    def finished(self) -> bool:
        return self.client.over

    @property
    def can_send(self) -> bool:
        return not self.client.over

    @property
    def event_silence(self) -> None:
        # The run says it in its logs.txt; its viewers are not sent it (left for later).
        return None

    @property
    def preview_root(self) -> Path | None:
        previews = self.client.run.previews
        return previews if previews is not None and previews.is_dir() else None

    @property
    def trials_root(self) -> Path | None:
        trials = self.client.run.folder / TRIALS_DIR
        return trials if trials.is_dir() else None

    @property
    def ending(self) -> RunEnding | None:
        if self._ending is None:
            client = self.client
            end = client.ending
            if end is not None:
                steps = end.next_steps
                where = client.run.cwd
                if steps and where is not None and where != Path.cwd():
                    # Its commands and paths are the run's, relative to where it runs.
                    steps = (*steps, f"Run these from the run's directory: cd {quote(str(where))}")
                self._ending = RunEnding(end.reason, end.problem, steps, end.complete)
            elif client.lost is not None:
                self._ending = RunEnding(
                    f"Lost run {client.run.name}: {client.lost}",
                    "its process is gone without saying the run ended (killed?)",
                    (
                        "Resume it with the command that started it (the same --name "
                        f"{client.run.name}): what finished is in {client.run.folder}",
                    ),
                )
        return self._ending

    def progress(self) -> Progress:
        return self.client.progress

    def carried_results(self) -> Mapping[ItemKey, ItemResult]:
        """Read when attaching: a work item with a rollout on the board is shown by that
        rollout, so only the results from before this invocation matter. (One run again by
        `--retry-failed` shows its old result until its new attempt is sent; the run's own
        dashboard knows it is pending.)"""
        return self._carried

    @property
    def baseline(self) -> Baseline | None:
        return self._baseline

    def baseline_counts(self) -> BaselineCounts | None:
        return self.client.baseline_counts

    def spend(self) -> Spend:
        reported = self.client.spend
        if reported is not None:
            return reported
        return board_spend(self.board.total_cost_usd, self.progress())

    def servers(self) -> list[ServerView]:
        servers = self.client.servers
        if not servers and not self.client.over:
            return [STARTING]
        return [
            ServerView(
                server.url,
                server.state,
                server.restarts,
                server.detail,
                server.watched,
                capacity=server.capacity,
                busy=server.busy,
                health_ms=server.health_ms,
            )
            for server in servers
        ]

    async def run(self) -> None:
        await self.client.follow()

    async def interrupt(self, *, cancel_in_flight: bool) -> None:
        """Never the viewer's to do: the run is stopped where it runs."""
        return None

    async def close(self) -> None:
        await self.client.close()

    async def submit(self, rollout: NewRollout) -> str:
        raise RuntimeError(NOT_FROM_HERE)

    async def rerun(self, rollout_id: str) -> str:
        raise RuntimeError(NOT_FROM_HERE)

    def dispatch(self) -> DispatchState | None:
        """The dispatch as the run last reported it; kept once the run is over, as the run's
        own dashboard keeps showing its last."""
        return self.client.dispatch

    async def pause_dispatch(self, paused: bool) -> None:
        if paused:
            await self.client.pause()
        else:
            await self.client.resume()

    async def set_max_in_flight(self, limit: int) -> int:
        return await self.client.set_max_in_flight(limit)

    async def set_budget(self, usd: float) -> None:
        await self.client.set_budget(usd)

    async def requeue(self, rollout_id: str) -> str:
        return await self.client.requeue(rollout_id)

    async def drain(self, url: str, *, drained: bool) -> None:
        await self.client.drain(url, drained=drained)
