"""The dispatch gate (core/eval/dispatch_gate.py): the pause and the max-in-flight the runner's
workers follow, and the cap the servers' capacity puts on the limit."""

from __future__ import annotations

import asyncio

from core.eval.dispatch_gate import DispatchGate, within_capacity


def test_the_limit_is_capped_by_the_advertised_capacity_and_never_below_one() -> None:
    assert within_capacity(8, 4) == 4
    assert within_capacity(3, 4) == 3
    assert within_capacity(100, None) == 100  # no server advertises one: nothing caps it
    assert within_capacity(0, 4) == 1
    assert within_capacity(-3, None) == 1


def test_set_limit_keeps_it_within_the_capacity() -> None:
    gate = DispatchGate(0)
    assert gate.limit == 1
    assert gate.set_limit(6, 16) == 6
    assert gate.set_limit(40, 16) == 16
    assert gate.set_limit(0, 16) == 1
    assert gate.limit == 1


async def test_every_change_wakes_the_waiting_workers() -> None:
    gate = DispatchGate(2)
    changes = [gate.pause, gate.resume, lambda: gate.set_limit(3, None), gate.notify]
    for change in changes:
        waiting = [asyncio.ensure_future(gate.next_change()) for _ in range(3)]
        await asyncio.sleep(0)
        assert not any(task.done() for task in waiting)
        assert gate.waiting == 3
        change()
        await asyncio.wait_for(asyncio.gather(*waiting), 5)
        assert gate.waiting == 0
    assert not gate.paused
    assert gate.limit == 3


def test_pause_and_resume() -> None:
    gate = DispatchGate(1)
    assert not gate.paused
    gate.pause()
    assert gate.paused
    gate.resume()
    assert not gate.paused
