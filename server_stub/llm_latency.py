"""Latency models of the stub chat endpoint: how long a request waits before it is answered.

Each model maps one uniform draw in [0, 1) to a delay in seconds (`sample(u)`), so a request
always consumes the same number of draws from the stub's seeded generator whatever the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

# z-score of the 99th percentile of a standard normal distribution.
_Z99 = NormalDist().inv_cdf(0.99)


def _check_seconds(name: str, value: float) -> None:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")


@dataclass(frozen=True)
class FixedLatency:
    """Always the same delay."""

    seconds: float = 0.0

    def __post_init__(self) -> None:
        _check_seconds("seconds", self.seconds)

    def sample(self, u: float) -> float:
        return self.seconds


@dataclass(frozen=True)
class UniformLatency:
    """A delay drawn uniformly from [low, high]."""

    low: float
    high: float

    def __post_init__(self) -> None:
        _check_seconds("low", self.low)
        _check_seconds("high", self.high)
        if self.high < self.low:
            raise ValueError("high must be >= low")

    def sample(self, u: float) -> float:
        return self.low + (self.high - self.low) * u


@dataclass(frozen=True)
class LogNormalLatency:
    """A log-normal delay given by its median and 99th percentile, clamped to [floor, cap].

    Real model latencies have a long right tail; median and p99 are the two numbers people
    actually know about an endpoint, so the distribution is specified by them.
    """

    median: float
    p99: float
    floor: float = 0.0
    cap: float | None = None

    def __post_init__(self) -> None:
        if not math.isfinite(self.median) or self.median <= 0:
            raise ValueError("median must be finite and > 0")
        if not math.isfinite(self.p99) or self.p99 < self.median:
            raise ValueError("p99 must be finite and >= median")
        _check_seconds("floor", self.floor)
        if self.cap is not None:
            _check_seconds("cap", self.cap)
            if self.cap < self.floor:
                raise ValueError("cap must be >= floor")

    def sample(self, u: float) -> float:
        sigma = math.log(self.p99 / self.median) / _Z99
        # Inverse-CDF sampling uses exactly one uniform draw, which keeps the seeded sequence
        # aligned across requests (random.lognormvariate consumes a variable number of draws).
        u = min(max(u, 1e-12), 1.0 - 1e-12)
        value = math.exp(math.log(self.median) + sigma * NormalDist().inv_cdf(u))
        value = max(value, self.floor)
        return value if self.cap is None else min(value, self.cap)


LatencyModel = FixedLatency | UniformLatency | LogNormalLatency
