"""What the run's model costs per token, and so what a call costs from its token counts.

The price comes from `--price-per-mtok IN,OUT` (US dollars per million input and output
tokens) when given: the user's word wins. Without it, a model LiteLLM knows is priced from
LiteLLM's own model table when the optional `litellm` extra is installed: the LiteLLM
upstream asks LiteLLM for each call's cost itself (`completion_cost`, which also knows
cached-token discounts), a `--chat-url` server's model is priced here from the same table.
The stub model, and a model the table does not hold, have no price unless one is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from core.eval.gateway.litellm_upstream import litellm_available, load_litellm
from core.eval.gateway.upstream_choice import UpstreamChoice

#: Prices are given per this many tokens.
MTOK = 1_000_000


@dataclass(frozen=True)
class TokenPrice:
    """US dollars per million input (prompt) and output (completion) tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        """A call's cost from its token counts; None when the model reported neither."""
        if prompt_tokens is None and completion_tokens is None:
            return None
        return (
            (prompt_tokens or 0) * self.input_per_mtok
            + (completion_tokens or 0) * self.output_per_mtok
        ) / MTOK

    def text(self) -> str:
        return f"${self.input_per_mtok:g} in, ${self.output_per_mtok:g} out per Mtok"


def parse_price_per_mtok(text: str) -> TokenPrice:
    """`IN,OUT` as given to `--price-per-mtok`; ValueError says what is wrong."""
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError(f"expected IN,OUT (USD per million input and output tokens), got {text!r}")
    try:
        prices = [float(part) for part in parts]
    except ValueError:
        raise ValueError(f"expected two numbers IN,OUT, got {text!r}") from None
    if not all(math.isfinite(price) and price >= 0 for price in prices):
        raise ValueError(f"expected finite, non-negative prices, got {text!r}")
    return TokenPrice(prices[0], prices[1])


def table_price(model: str) -> TokenPrice | None:
    """`model`'s price in LiteLLM's model table (None without the extra, or when the table
    does not hold it or holds no token prices for it)."""
    if not litellm_available():
        return None
    table: Any = getattr(load_litellm(model), "model_cost", None)
    entry = table.get(model) if isinstance(table, dict) else None
    if not isinstance(entry, dict):
        return None
    given = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    prices = [float(p) for p in given if isinstance(p, (int, float)) and not isinstance(p, bool)]
    if len(prices) != 2:
        return None
    return TokenPrice(prices[0] * MTOK, prices[1] * MTOK)


@dataclass(frozen=True)
class RunPrice:
    """How the run's model calls are priced."""

    #: What the gateway prices each call with from its token counts; None when the upstream
    #: prices its calls itself (LiteLLM) or nothing does.
    per_token: TokenPrice | None
    #: Some price is known: a budget can be kept.
    known: bool
    #: Where the price comes from, for the log and `--json`.
    source: str


#: No price known: the stub model's, unless one is given.
NO_PRICE = RunPrice(None, False, "none")


def run_price(upstream: UpstreamChoice, given: TokenPrice | None) -> RunPrice:
    """The run's price: `given` (`--price-per-mtok`), else LiteLLM's table for the model."""
    if given is not None:
        return RunPrice(given, True, "--price-per-mtok")
    if upstream.kind == "stub":
        return NO_PRICE
    if upstream.kind == "litellm":
        known = table_price(upstream.model_path) is not None
        return RunPrice(None, known, "LiteLLM" if known else "none")
    price = table_price(upstream.sent_model)
    return RunPrice(price, price is not None, "LiteLLM's model table" if price else "none")


__all__ = [
    "MTOK",
    "NO_PRICE",
    "RunPrice",
    "TokenPrice",
    "parse_price_per_mtok",
    "run_price",
    "table_price",
]
