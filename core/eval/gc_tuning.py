"""The eval process's garbage collector, set for a run that keeps thousands of objects alive.

A run holds a handle, a record, a poll and a model call per rollout in flight, and every
finished result: hundreds of thousands of live objects that CPython's default collector
rescans over and over (a full collection every few seconds at 1,500 in flight, each pausing
the event loop for up to a second: bench/README.md). `settled_for_a_run()`, once the process
has imported and prepared everything, moves what exists then out of the collector's sight
(`gc.freeze`: modules, classes, the plan) and collects the young generation every 50,000
allocations instead of 700, so the older ones are seldom walked, until the run is over.
Reference counting still frees everything that is not in a cycle at once; cycles are still
collected, later. A command that only reads, computes and prints (`compare --json`) goes
further: `paused_for_a_batch()` collects nothing at all until it is done.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: gen0 every 50,000 net allocations of tracked objects (CPython's default: 700); gen1 after
#: 5 of those, gen2 after 10,000 gen1 (and, as always, only when it would walk a quarter more
#: long-lived objects than last time). A gen1 walks what the young ones let through since the
#: last: after 50 of them that was up to 2.5 million objects, a 170 ms pause with a
#: 100,000-row board (a sort drawn in 240 ms instead of 75: bench/dashboard.py). After 5 it
#: is a tenth of that; each object is still walked once per generation, and a full
#: collection comes as seldom as before.
RUN_THRESHOLDS = (50_000, 5, 10_000)


@contextmanager
def settled_for_a_run() -> Iterator[None]:
    """This process's collector tuned for an eval run, for the block (entered just before the
    run starts); afterwards as it was, what was frozen back in its sight."""
    previous = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*RUN_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
        gc.unfreeze()


@contextmanager
def paused_for_a_batch() -> Iterator[None]:
    """No collection at all for the block: for a command that reads, computes and prints once,
    then exits (`compare --json`), and makes no cycles worth freeing before it does. Even
    settled, the young generation is walked every 50,000 allocations: comparing two runs of
    100,000 items, 66 walks that freed nothing and took 0.13–0.17 s (bench/compare_runs.py).

    At its end everything alive is frozen, as `settled_for_a_run` freezes at its start, and
    left so (reference counting still frees it): otherwise the collector, enabled again, would
    walk all the block made at its first pass, which costs as much as the walks saved."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


__all__ = ["RUN_THRESHOLDS", "paused_for_a_batch", "settled_for_a_run"]
