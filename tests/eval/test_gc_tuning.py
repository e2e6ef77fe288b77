"""The collector is tuned for the run's duration only, then as it was; paused for a batch."""

from __future__ import annotations

import gc

from core.eval.gc_tuning import RUN_THRESHOLDS, paused_for_a_batch, settled_for_a_run


def test_the_collector_is_tuned_for_the_run_then_restored() -> None:
    before = gc.get_threshold()
    kept = [object() for _ in range(10)]  # alive before the run: frozen during it
    with settled_for_a_run():
        assert gc.get_threshold() == RUN_THRESHOLDS
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert len(kept) == 10


def test_a_batch_runs_without_collection_and_leaves_what_it_made_frozen() -> None:
    assert gc.isenabled()
    try:
        with paused_for_a_batch():
            assert not gc.isenabled()
            made = [[index] for index in range(1_000)]
        assert gc.isenabled()
        # What the batch made is out of the collector's sight, so its next pass skips it.
        assert gc.get_freeze_count() >= len(made)
    finally:
        gc.unfreeze()
