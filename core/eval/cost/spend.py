"""What the run has spent on its model, at what pace, what it will have spent at the end, and
the budget that bounds it (`--budget USD`).

The projection: the spend so far, plus the spend per work item this session finished times
the work items left (pending and in flight). An item in flight has spent part of its share
already, so the projection leans high until the run ends, which is the side a budget should
err on. Before this session finished an item there is no projection.

The budget: when the projected total would pass it, dispatch pauses (those in flight go on);
`P` resumes anyway, and the budget does not pause the run again until it is changed; raising
the budget above the projection resumes a pause it made, and so does the projection coming
back within it (items in flight when it paused finished cheaper than it foresaw). When the
spend reaches it, the run stops: no new item is sent, those in flight are cancelled (they
would spend more), and what is left stays pending for a resume, whose spend counts from what
the run's calls.jsonl says was spent before. A run with nobody to press `P` (headless) is
never paused by its budget, only stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from core.eval.results.calls import read_calls
from core.eval.results.metrics import Progress

if TYPE_CHECKING:
    from core.eval.results.logs import RunLog
    from core.eval.results.recorder import TransitionRecorder
    from core.eval.steering import RunControl

BudgetState = Literal["off", "within", "paused", "reached"]
"""No budget; spend and projection within it; dispatch paused by it; the run stopped at it."""
BUDGET_STATES: tuple[BudgetState, ...] = ("off", "within", "paused", "reached")
#: The step of the budget's logs.txt lines, as the other controls'.
BUDGET_STEP = "control"


@dataclass(frozen=True)
class Spend:
    """What a front end shows of the run's spend (US dollars)."""

    #: Spent so far, by this session and those before it (a resume); None while no call's
    #: price is known.
    spent_usd: float | None
    #: Spent by this session alone: its pace is this over its elapsed time.
    session_usd: float | None = None
    #: The whole run's spend at its end, projected (module docstring); None before an item
    #: of this session finished.
    projected_usd: float | None = None
    budget_usd: float | None = None
    state: BudgetState = "off"

    def per_minute(self, elapsed_sec: float) -> float | None:
        """This session's spend per minute over its `elapsed_sec`."""
        if self.session_usd is None or elapsed_sec <= 0:
            return None
        return self.session_usd / elapsed_sec * 60


def spent_before(calls_path: Path) -> float:
    """What the run's earlier sessions spent, as their calls.jsonl says (0 for a new run)."""
    if not calls_path.exists():
        return 0.0
    return sum(call.cost_usd or 0.0 for call in read_calls(calls_path, lambda _warning: None))


def project(spent: float | None, session_spent: float | None, progress: Progress) -> float | None:
    """The run's total spend at its end: module docstring."""
    left = progress.total - progress.done
    if spent is not None and left == 0:
        return spent
    finished_here = progress.done - progress.carried
    if spent is None or session_spent is None or finished_here <= 0:
        return None
    return spent + session_spent / finished_here * left


def board_spend(spent: float | None, progress: Progress) -> Spend:
    """The spend of a run whose budget keeper is not at hand (a replay, an attached or a
    watched run): what its board summed, projected the same way, with no budget."""
    return Spend(spent_usd=spent, session_usd=spent, projected_usd=project(spent, spent, progress))


def cents(usd: float) -> int:
    """A transitions.jsonl control line's `value` is a whole number: dollars in cents."""
    return round(usd * 100)


class RunBudget:
    """The budget of one run, acting through the run's controls: module docstring."""

    def __init__(
        self,
        limit_usd: float | None,
        *,
        before_usd: float,
        session_spent: Callable[[], float | None],
        progress: Callable[[], Progress],
        control: RunControl,
        recorder: TransitionRecorder,
    ) -> None:
        """`session_spent`: this session's spend (the board's sum); `progress`: the run's."""
        self.limit_usd = limit_usd
        self.before_usd = before_usd
        self._session_spent = session_spent
        self._progress = progress
        self._control = control
        self._recorder = recorder
        self._log: RunLog | None = None
        self._stop: Callable[[str], None] | None = None
        #: Dispatch is paused by the budget (not by hand).
        self._holding = False
        #: A pause of the budget's was resumed by hand: no new one until the budget changes.
        self._waived = False
        self.reached = False
        #: A front end can lift a pause (the dashboard): without one (headless) the budget
        #: never pauses, it only stops the run at the spend.
        self.pauses = True

    def record_to(self, log: RunLog) -> None:
        self._log = log

    def stop_with(self, stop: Callable[[str], None]) -> None:
        """How the run is stopped once the spend reaches the budget (the runner exists)."""
        self._stop = stop

    def spend(self) -> Spend:
        session = self._session_spent()
        spent = (
            None if session is None and not self.before_usd else self.before_usd + (session or 0.0)
        )
        return Spend(
            spent_usd=spent,
            session_usd=session,
            projected_usd=project(spent, session, self._progress()),
            budget_usd=self.limit_usd,
            state=self.state(),
        )

    def state(self) -> BudgetState:
        if self.limit_usd is None:
            return "off"
        if self.reached:
            return "reached"
        return "paused" if self._holding else "within"

    def check(self) -> None:
        """Called as the spend or the progress changes (a model call or a work item ended):
        pause or stop the run when the budget says so."""
        limit = self.limit_usd
        if limit is None or self.reached:
            return
        if self._holding and not self._control.state().paused:
            self._holding, self._waived = False, True  # resumed by hand (`P`)
        spend = self.spend()
        spent = spend.spent_usd or 0.0
        if spent >= limit and self._stop is not None:
            self.reached = True
            self._holding = False
            message = (
                f"budget reached: ${spent:.4f} spent of ${limit:g}; the run stops, what is "
                "left stays pending for a resume"
            )
            self._record(message, "budget_reached", limit, spent)
            self._stop(message)
            return
        projected = spend.projected_usd
        if self._holding and (projected is None or projected <= limit):
            # In-flight items' spend made the projection high; finished, they bring it back.
            self._lift(projected, limit, spent)
            return
        if (
            self.pauses
            and projected is not None
            and projected > limit
            and not self._holding
            and not self._waived
            and not self._control.state().paused
        ):
            self._holding = True
            self._record(
                f"budget: the projected total ${projected:.4f} would pass ${limit:g}; dispatch "
                "pauses (P resumes, or raise the budget)",
                "budget_pause",
                limit,
                spent,
                projected,
            )
            self._control.pause()

    def set_limit(self, limit_usd: float) -> None:
        """A new budget (raised from the dashboard): recorded; a pause the budget made is
        lifted when the projection is within the new one, and a budget that stopped the run
        stays reached (a resume starts it again)."""
        before = self.limit_usd
        self.limit_usd = limit_usd
        self._waived = False
        spend = self.spend()
        self._record(
            f"budget ${before:g} -> ${limit_usd:g}"
            if before is not None
            else f"budget ${limit_usd:g}",
            "budget",
            limit_usd,
            spend.spent_usd or 0.0,
            spend.projected_usd,
        )
        self.check()

    def _lift(self, projected: float | None, limit: float, spent: float) -> None:
        """The projection is within the budget again: the pause the budget made ends."""
        self._holding = False
        shown = "unknown" if projected is None else f"${projected:.4f}"
        self._record(
            f"budget: the projected total {shown} is within ${limit:g}; dispatch resumes",
            "budget_resume",
            limit,
            spent,
            projected,
        )
        self._control.resume()

    def _record(
        self,
        message: str,
        action: str,
        limit: float,
        spent: float,
        projected: float | None = None,
    ) -> None:
        """One logs.txt line and one transitions.jsonl control line, as the other controls."""
        if self._log is not None:
            self._log.write(
                message,
                step=BUDGET_STEP,
                details={"budget_usd": limit, "projected_usd": projected, "spent_usd": spent},
            )
        self._recorder.steered(action, cents(limit))


__all__ = [
    "BUDGET_STATES",
    "BudgetState",
    "RunBudget",
    "Spend",
    "board_spend",
    "cents",
    "project",
    "spent_before",
]
