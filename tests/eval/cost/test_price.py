"""Where a run's price comes from: the flag's word first, else LiteLLM's model table (when the
extra is installed and knows the model), else none; and what a call costs at a price."""

from __future__ import annotations

import re

import pytest

from core.eval.cost.price import TokenPrice, parse_price_per_mtok, run_price
from core.eval.gateway.litellm_upstream import litellm_available
from core.eval.gateway.upstream_choice import choose_upstream


def test_a_call_costs_its_tokens_at_the_price() -> None:
    price = parse_price_per_mtok("2.5,10")
    assert price == TokenPrice(2.5, 10.0)
    assert price.cost(1_000_000, 100_000) == pytest.approx(3.5)
    assert price.cost(None, 10) == pytest.approx(0.0001)
    assert price.cost(None, None) is None, "a call that reported no tokens has no known cost"


@pytest.mark.parametrize("text", ["3", "1,2,3", "a,b", "1,-2", "1,inf", ","])
def test_a_price_that_is_not_two_non_negative_numbers_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(text))):  # the message quotes it
        parse_price_per_mtok(text)


def test_the_given_price_wins_and_the_stub_has_none_without_it() -> None:
    stub = choose_upstream("stub", None)
    assert not run_price(stub, None).known
    given = run_price(stub, TokenPrice(1, 2))
    assert given.known and given.per_token == TokenPrice(1, 2)
    assert given.source == "--price-per-mtok"


@pytest.mark.skipif(not litellm_available(), reason="the litellm extra is not installed")
def test_a_chat_url_model_litellm_knows_is_priced_from_its_table() -> None:
    known = run_price(choose_upstream("http://127.0.0.1:9/v1", None, "gpt-4o"), None)
    assert known.known and known.per_token is not None
    assert known.per_token.input_per_mtok > 0 and known.source == "LiteLLM's model table"
    unknown = run_price(choose_upstream("http://127.0.0.1:9/v1", None, "my-own-model"), None)
    assert not unknown.known and unknown.per_token is None
