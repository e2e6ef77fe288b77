"""The stub chat endpoint's knobs: its settings, the `X-Stub-Behaviour` header and the plan
they make for each request.

Knobs (`StubChatSettings`): a latency model, an error rate (HTTP 500 with an OpenAI-style error
body), a wrong-answer rate (the number is off by 1 or 2) and a seed. Every request draws exactly
four numbers from one seeded `random.Random`, whatever the outcome, so a sequence of requests
replays identically.

Per-request overrides travel in the request header `X-Stub-Behaviour` (a header rather than a
body field, so that the chat payload stays a plain OpenAI request). Its value is a
comma-separated list of directives:

- `ok`: answer correctly whatever the rates say;
- `error`: answer HTTP 500;
- `wrong`: answer off by a small amount;
- `slow:<seconds>`: wait this long instead of the sampled latency;
- `hang`: never answer; the wait ends when the client disconnects.

An unknown directive is answered with HTTP 400, so a typo in a demo row shows up at once.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Literal

from server_stub.llm_latency import FixedLatency, LatencyModel

BEHAVIOUR_HEADER = "X-Stub-Behaviour"
#: Upper bound of a `hang`: long enough to outlast any rollout deadline, yet finite.
HANG_LIMIT_SEC = 3600.0


# --- settings -----------------------------------------------------------------------------------


@dataclass
class StubChatSettings:
    """How the stub behaves when a request does not say otherwise."""

    latency: LatencyModel = field(default_factory=FixedLatency)
    #: Probability of answering HTTP 500 with an OpenAI-style error body.
    error_rate: float = 0.0
    #: Probability of answering a number off by 1 or 2.
    wrong_answer_rate: float = 0.0
    #: Seed of the app's `random.Random`; None seeds from the OS (not reproducible).
    seed: int | None = 0

    def __post_init__(self) -> None:
        for name in ("error_rate", "wrong_answer_rate"):
            rate = getattr(self, name)
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {rate!r}")


# --- behaviour overrides ------------------------------------------------------------------------

Outcome = Literal["ok", "error", "wrong"]
_OUTCOMES: dict[str, Outcome] = {"ok": "ok", "error": "error", "wrong": "wrong"}


@dataclass(frozen=True)
class Behaviour:
    """A parsed `X-Stub-Behaviour` header: None fields leave the decision to the settings."""

    outcome: Outcome | None = None
    delay: float | None = None


def parse_behaviour(value: str | None) -> Behaviour:
    """Parse the header value; raises ValueError naming the bad directive."""
    outcome: Outcome | None = None
    delay: float | None = None
    for raw in (value or "").split(","):
        directive = raw.strip().lower()
        if not directive:
            continue
        if directive in _OUTCOMES:
            outcome = _OUTCOMES[directive]
        elif directive == "hang":
            delay = HANG_LIMIT_SEC
        elif directive.startswith("slow:"):
            delay = _parse_delay(directive)
        else:
            raise ValueError(f"unknown {BEHAVIOUR_HEADER} directive {raw.strip()!r}")
    return Behaviour(outcome=outcome, delay=delay)


def _parse_delay(directive: str) -> float:
    try:
        seconds = float(directive.removeprefix("slow:"))
    except ValueError:
        raise ValueError(f"{directive!r}: expected slow:<seconds>") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{directive!r}: seconds must be finite and >= 0")
    return seconds


@dataclass(frozen=True)
class Plan:
    """What one request will get: its outcome, its delay and how far off a wrong answer is."""

    outcome: Outcome
    delay: float
    delta: int


_DELTAS = (-2, -1, 1, 2)


def plan_request(settings: StubChatSettings, rng: random.Random, behaviour: Behaviour) -> Plan:
    """Decide one request's fate. Always draws four numbers so the sequence stays aligned."""
    u_error, u_wrong, u_latency, u_delta = (rng.random() for _ in range(4))
    outcome = behaviour.outcome
    if outcome is None:
        if u_error < settings.error_rate:
            outcome = "error"
        elif u_wrong < settings.wrong_answer_rate:
            outcome = "wrong"
        else:
            outcome = "ok"
    delay = behaviour.delay if behaviour.delay is not None else settings.latency.sample(u_latency)
    delta = _DELTAS[min(int(u_delta * len(_DELTAS)), len(_DELTAS) - 1)]
    return Plan(outcome=outcome, delay=delay, delta=delta)
