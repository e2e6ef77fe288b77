"""The collector is tuned for the run's duration only, then as it was."""

from __future__ import annotations

import gc

from core.eval.gc_tuning import RUN_THRESHOLDS, settled_for_a_run


def test_the_collector_is_tuned_for_the_run_then_restored() -> None:
    before = gc.get_threshold()
    kept = [object() for _ in range(10)]  # alive before the run: frozen during it
    with settled_for_a_run():
        assert gc.get_threshold() == RUN_THRESHOLDS
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert len(kept) == 10
