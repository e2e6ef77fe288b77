"""The argparse `type=` parsers of the subcommands' flags: numbers, seconds, ports, URLs.

Each raises `argparse.ArgumentTypeError`, so that argparse names the flag in its message.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.eval.hedging import HedgeAfter
from core.eval.plan.server_url import base_url_problem

if TYPE_CHECKING:
    from core.eval.cost.price import TokenPrice


def _whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


positive_int = _whole_number(1)
non_negative_int = _whole_number(0)


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected finite, non-negative seconds, got {text!r}")
    return value


def hedge_after(text: str) -> HedgeAfter:
    """`--hedge-after`: seconds (`90`), or a multiple of the median duration of the items
    finished so far (`3x`); either more than 0."""
    factor = text.endswith(("x", "X"))
    try:
        value = float(text[:-1] if factor else text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"expected seconds (e.g. 90) or a multiple of the median duration (e.g. 3x), "
            f"more than 0, got {text!r}"
        )
    return HedgeAfter(factor=value) if factor else HedgeAfter(seconds=value)


def finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def port(text: str) -> int:
    value = non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"ports go up to 65535, got {value}")
    return value


def fixed_port(text: str) -> int:
    """A fixed port to listen on: 1 to 65535 (0, "any free port", is what leaving it out means)."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"ports go up to 65535, got {value}")
    return value


def http_url(text: str) -> str:
    """A base URL to reach a server at (`eval --server`, `--advertise-url`; the check is
    `base_url_problem`'s)."""
    problem = base_url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def host_port(text: str) -> tuple[str, int]:
    """`HOST:PORT` to listen on (`watch --events-listen`): an IPv4 address or name, or an IPv6
    address in brackets (`[::1]:4318`), and a port of 0-65535 (0: a free one)."""
    host, colon, given = text.rpartition(":")
    if not colon or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise argparse.ArgumentTypeError(f"{text!r}: write an IPv6 address in brackets, [::1]:4318")
    if not host:
        raise argparse.ArgumentTypeError(f"{text!r} has no host")
    return host, port(given)


def usd(text: str) -> float:
    """An amount of US dollars above zero (`--budget`)."""
    try:
        value = float(text.removeprefix("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected US dollars, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite amount above 0, got {text!r}")
    return value


def price_per_mtok(text: str) -> TokenPrice:
    """`IN,OUT`: USD per million input and output tokens (`--price-per-mtok`)."""
    # Here, not at the top: the price module reaches the gateway's, which no --help needs.
    from core.eval.cost.price import parse_price_per_mtok

    try:
        return parse_price_per_mtok(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
