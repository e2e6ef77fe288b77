"""A stub OpenAI-compatible chat endpoint: deterministic answers, latency and fault knobs.

`create_chat_app()` builds a Starlette app that answers `POST <any base path>/chat/completions`
(so per-rollout base URLs such as `http://127.0.0.1:P/v1/rollouts/<id>` work unchanged) with
the OpenAI response shape. It solves the arithmetic question in the last user message ("What is
17 * 23?", "17x23", "17 times 23", with +, -, *, / on integers and decimals) and answers with
just the number; anything else gets a short fixed reply.

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
Waits end early when the client goes away, so an abandoned call never holds up shutdown.
"""

from __future__ import annotations

import hmac
import itertools
import logging
import math
import random
import re
import time
from dataclasses import dataclass, field
from decimal import Context, Decimal
from fractions import Fraction
from statistics import NormalDist
from typing import Any, Literal

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

logger = logging.getLogger(__name__)

BEHAVIOUR_HEADER = "X-Stub-Behaviour"
DEFAULT_MODEL = "osmosis-stub"
#: Upper bound of a `hang`: long enough to outlast any rollout deadline, yet finite.
HANG_LIMIT_SEC = 3600.0

# z-score of the 99th percentile of a standard normal distribution.
_Z99 = NormalDist().inv_cdf(0.99)


# --- latency models -------------------------------------------------------------------------


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


# --- settings, counters, behaviour overrides ---------------------------------------------------


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


@dataclass
class StubChatStats:
    """Counters kept on `app.state.stats`, for tests and the demo."""

    requests: int = 0  # chat requests received, whatever the outcome
    completions: int = 0  # answered 200
    errors: int = 0  # injected 500s
    wrong_answers: int = 0  # 200s whose answer was deliberately wrong
    rejected: int = 0  # 400s and 401s
    disconnects: int = 0  # clients that left before the answer was ready
    in_flight: int = 0


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


# --- answers and token counts ------------------------------------------------------------------

_NUMBER = r"-?(?:\d+(?:\.\d+)?|\.\d+)"
_OPERATOR = r"\*|×|x|\+|-|−|/|÷|plus|minus|times|multiplied\s+by|divided\s+by|over"
_ARITHMETIC = re.compile(
    rf"(?P<a>{_NUMBER})\s*(?P<op>{_OPERATOR})\s*(?P<b>{_NUMBER})", re.IGNORECASE
)
_OPERATORS: dict[str, str] = {
    "*": "*", "×": "*", "x": "*", "times": "*", "multiplied by": "*",
    "+": "+", "plus": "+",
    "-": "-", "−": "-", "minus": "-",
    "/": "/", "÷": "/", "divided by": "/", "over": "/",
}  # fmt: skip
_TOKEN = re.compile(r"\w+|[^\w\s]")
FALLBACK_REPLY = "I am the osmosis stub model. Ask me arithmetic, e.g. 'What is 17 * 23?'"
WRONG_FALLBACK_REPLY = "I am not sure."


def solve_arithmetic(text: str) -> Fraction | None:
    """The value of the last `a <op> b` in `text`; None if there is none or b is a zero divisor.

    The last match wins so that a preamble such as "Question 2:" cannot be taken for operands.
    """
    matches = list(_ARITHMETIC.finditer(text))
    if not matches:
        return None
    match = matches[-1]
    a, b = Fraction(match["a"]), Fraction(match["b"])
    op = _OPERATORS[re.sub(r"\s+", " ", match["op"].lower())]
    if op == "*":
        return a * b
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    return None if b == 0 else a / b


def format_number(value: Fraction) -> str:
    """Integers print as such; other values as plain decimals, rounded to 10 places."""
    if value.denominator == 1:
        return str(value.numerator)
    # A generous precision so the quantize below never overflows for large operands.
    context = Context(prec=80)
    quotient = context.divide(Decimal(value.numerator), Decimal(value.denominator))
    rounded = quotient.quantize(Decimal("1e-10"), context=context).normalize(context)
    return format(rounded, "f")


def text_of(content: Any) -> str:
    """The text of an OpenAI message `content`: a string, or a list of typed parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        ).strip()
    return ""


def count_tokens(text: str) -> int:
    """Words and punctuation marks: a plausible stand-in for a tokenizer."""
    return len(_TOKEN.findall(text))


def reply_for(messages: list[Any], outcome: Outcome, delta: int) -> str:
    question = _last_user_text(messages)
    value = solve_arithmetic(question)
    if value is None:
        if _ARITHMETIC.search(question):  # a division by zero
            return "0" if outcome == "wrong" else "undefined"
        return WRONG_FALLBACK_REPLY if outcome == "wrong" else FALLBACK_REPLY
    return format_number(value + delta if outcome == "wrong" else value)


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return text_of(message.get("content"))
    return ""


# --- the app ------------------------------------------------------------------------------------


def _error(status: int, message: str, kind: str, code: str | None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(body, status_code=status)


async def _wait_unless_disconnected(request: Request, seconds: float) -> bool:
    """Sleep `seconds`; return early (True) if the client disconnects meanwhile.

    A hung or slow call whose client gave up would otherwise keep uvicorn from shutting down,
    since it waits for every in-progress response.
    """
    if seconds <= 0:
        return False
    disconnected = False
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal disconnected
            # The body is consumed already, so the next message can only be the disconnect.
            while (await request.receive())["type"] != "http.disconnect":
                pass
            disconnected = True
            group.cancel_scope.cancel()

        group.start_soon(watch)
        await anyio.sleep(seconds)
        group.cancel_scope.cancel()
    return disconnected


class _ChatHandler:
    """The state behind the route: settings, the seeded generator, the bearer and counters."""

    def __init__(
        self, settings: StubChatSettings, api_key: str | None, stats: StubChatStats
    ) -> None:
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.stats = stats
        # Taken when an answer is built: concurrent answers must not share an id.
        self._ids = itertools.count(1)
        # Only the expected header value is kept; the key itself is never logged.
        self._expected = f"Bearer {api_key}".encode() if api_key is not None else None

    def _authorized(self, request: Request) -> bool:
        if self._expected is None:
            return True
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, self._expected)

    async def endpoint(self, request: Request) -> JSONResponse:
        self.stats.requests += 1
        self.stats.in_flight += 1
        try:
            response = await self._handle(request)
        finally:
            self.stats.in_flight -= 1
        logger.debug("stub chat %s -> %d", request.url.path, response.status_code)
        return response

    async def _handle(self, request: Request) -> JSONResponse:
        if not self._authorized(request):
            self.stats.rejected += 1
            message = "Incorrect API key provided."
            return _error(401, message, "invalid_request_error", "invalid_api_key")
        try:
            body = await self._read_body(request)
            behaviour = parse_behaviour(request.headers.get(BEHAVIOUR_HEADER))
        except ValueError as exc:
            self.stats.rejected += 1
            return _error(400, str(exc), "invalid_request_error", None)
        plan = plan_request(self.settings, self.rng, behaviour)
        if await _wait_unless_disconnected(request, plan.delay):
            # Nobody will read the answer; uvicorn drops it. Counted apart from real outcomes.
            self.stats.disconnects += 1
            return _error(499, "client closed the request", "client_closed", None)
        if plan.outcome == "error":
            self.stats.errors += 1
            message = "The stub model failed on purpose (injected fault)."
            return _error(500, message, "server_error", "stub_injected_error")
        if plan.outcome == "wrong":
            self.stats.wrong_answers += 1
        self.stats.completions += 1
        reply = reply_for(body["messages"], plan.outcome, plan.delta)
        return JSONResponse(self._completion(body, reply))

    @staticmethod
    async def _read_body(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise ValueError("the request body is not valid JSON") from None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise ValueError("'messages' must be a list of chat messages")
        if body.get("stream"):
            raise ValueError("the stub does not support streaming; send stream=false")
        return body

    def _completion(self, body: dict[str, Any], reply: str) -> dict[str, Any]:
        model = body.get("model")
        prompt_tokens = sum(
            count_tokens(text_of(m.get("content"))) for m in body["messages"] if isinstance(m, dict)
        )
        completion_tokens = count_tokens(reply)
        return {
            "id": f"chatcmpl-stub-{next(self._ids):08d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model if isinstance(model, str) and model else DEFAULT_MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def create_chat_app(
    settings: StubChatSettings | None = None, *, api_key: str | None = None
) -> Starlette:
    """The stub chat endpoint as an ASGI app; `app.state` holds `settings` and `stats`.

    With `api_key`, every chat request needs `Authorization: Bearer <api_key>` exactly.
    """
    if api_key is not None and not api_key.strip():
        raise ValueError("api_key must be non-empty when provided")
    settings = settings if settings is not None else StubChatSettings()
    stats = StubChatStats()
    handler = _ChatHandler(settings, api_key, stats)
    # Two routes: the path convertor needs at least one character, so the bare path is separate.
    routes = [
        Route("/chat/completions", handler.endpoint, methods=["POST"]),
        Route("/{base:path}/chat/completions", handler.endpoint, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.state.settings = settings
    app.state.stats = stats
    return app
