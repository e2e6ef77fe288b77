"""A fixed state of `osmosis-tui watch` for its snapshots and Pilot tests: a real `WatchSource`
(never started: `start_work=False`) whose board got the ownership events of two servers'
rollouts, from two runs and a harness that names none, with the server times chosen here.

One rollout is flagged stuck (running 80 s against a 60 s `--stuck-after`), one was cancelled
from the watch, one is queued; the rest ended as their servers said. Both servers answered
/health.
"""

from __future__ import annotations

from core.eval.servers.pool import RolloutServerSlot, ServerPool
from core.eval.watch import FleetCanceller, WatchPlan
from core.phases import PhaseMark
from core.reported_by import ReportedBy
from core.rollout_record import CancelRequest
from core.types import RolloutStatus
from tests.tui.states import NOW, T0, THEME
from tui.app import DashboardApp, create_app
from tui.sources.watch import WatchSource

Q, R, G = RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.GRADING
OK, FAIL, CANCELLED = RolloutStatus.SUCCESS, RolloutStatus.FAILURE, RolloutStatus.CANCELLED
#: The wall clock at the board's start (`T0`): 2026-03-01 12:00:00 UTC.
WALL_T0 = 1_772_366_400.0
SERVER_A = "http://127.0.0.1:8431"
SERVER_B = "http://127.0.0.1:8432"
NIGHTLY = ReportedBy("rollout-a", namespace="team-rl", run_id="r-0412", run_name="nightly")
TRAINER = ReportedBy("rollout-b", namespace="team-rl", run_id="t-77", run_name="grpo-step-120")
HARNESS = ReportedBy("rollout-b")

#: (rollout id, whose, [(status, seconds after T0)]).
ROLLOUTS: list[tuple[str, ReportedBy, list[tuple[RolloutStatus, float]]]] = [
    ("7f3a9c01-nightly-row-0", NIGHTLY, [(Q, 1.0), (R, 1.2), (G, 9.8), (OK, 10.4)]),
    ("7f3a9c02-nightly-row-1", NIGHTLY, [(Q, 1.1), (R, 1.3), (G, 12.0), (OK, 12.9)]),
    ("7f3a9c03-nightly-row-2", NIGHTLY, [(Q, 1.2), (R, 1.4), (FAIL, 20.5)]),
    ("7f3a9c04-nightly-row-3", NIGHTLY, [(Q, 2.0), (R, 15.0)]),
    ("c81d0e11-grpo-0", TRAINER, [(Q, 30.0), (R, 30.1), (G, 52.0), (OK, 53.0)]),
    ("c81d0e12-grpo-1", TRAINER, [(Q, 30.0), (R, 30.2), (G, 88.0)]),
    ("c81d0e13-grpo-2", TRAINER, [(Q, 30.1), (R, 31.0), (CANCELLED, 70.0)]),
    ("c81d0e14-grpo-3", TRAINER, [(Q, 60.0), (R, 61.0), (G, 90.0), (OK, 91.5)]),
    ("e55b2a90-script", HARNESS, [(Q, 85.0), (R, 86.0)]),
    ("e55b2a91-script", HARNESS, [(Q, 93.0)]),
]
STUCK = "7f3a9c04-nightly-row-3"
CANCELLED_HERE = "c81d0e13-grpo-2"


def watch_source() -> WatchSource:
    source = WatchSource(WatchPlan(servers=(SERVER_A, SERVER_B), stuck_after_sec=60.0))
    board = source.board
    board.started_at = T0
    # The servers as the watch's run leaves them once their /health answered.
    source.session.pool = ServerPool.connect([SERVER_A, SERVER_B], api_key=None)
    slots: list[RolloutServerSlot] = source.session.slots
    for slot, instance, running in zip(slots, ("rollout-a", "rollout-b"), (1, 3), strict=True):
        slot.health = {
            "status": "ok",
            "instance_id": instance,
            "concurrency": {"max_concurrent": 8, "running": running, "queued": 1},
        }
        slot.instance_id = instance
    for rollout_id, reported_by, steps in ROLLOUTS:
        for sequence, (status, at) in enumerate(steps):
            mark = PhaseMark(
                status,
                T0 + at,
                "server",
                server_time=WALL_T0 + at,
                event_sequence=sequence + 1,
                server_id=reported_by.server_id,
            )
            canceller = FleetCanceller(slots, reported_by.server_id, rollout_id)
            board.server_report(rollout_id, mark, reported_by, canceller=canceller)
    # Cancelled from the watch: asked at 69.5 s, its server's answer and its event at 70 s.
    board.records[CANCELLED_HERE].cancels += (
        CancelRequest(T0 + 69.5, disposition="cancelled_running", answered_at=T0 + 70.0),
    )
    board.take_changes()
    return source


def watch_app(source: WatchSource | None = None) -> DashboardApp:
    """The watch's dashboard over `watch_source()`: frozen clock, fixed theme, no animations."""
    app = create_app(source or watch_source(), clock=lambda: NOW, start_work=False)
    app.theme = THEME
    app.animation_level = "none"
    return app
