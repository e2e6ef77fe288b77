"""The run's spend in the attach protocol's STATE (SPEND): what a viewer reads is what the run
said, and a viewer of a run that says nothing of spend, or something else, knows none."""

from __future__ import annotations

import json

from core.eval.attach.protocol import spend_from, spend_state
from core.eval.cost.spend import Spend


def test_spend_crosses_the_wire_as_it_was() -> None:
    spend = Spend(
        spent_usd=4.12, session_usd=1.5, projected_usd=12.47, budget_usd=10.0, state="paused"
    )
    assert spend_from(json.loads(json.dumps(spend_state(spend)))) == spend


def test_a_missing_or_strange_spend_is_read_as_none_or_off() -> None:
    assert spend_from(None) is None
    odd = spend_from({"spent_usd": "lots", "state": "bankrupt", "budget_usd": 3})
    assert odd == Spend(spent_usd=None, budget_usd=3.0, state="off")
