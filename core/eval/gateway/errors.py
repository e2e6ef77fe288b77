"""What can go wrong in the model gateway (EVAL.md §4): `GatewayError` and its children, a
branch of the eval's error tree (drawn in `core.eval.errors`).

Every message here is already masked: an upstream masks its own key (and the ambient
`*KEY*`/`*TOKEN*`/`*SECRET*`/`*PASSWORD*` environment values) before it raises, so an error can
be printed or logged as it is.
"""

from __future__ import annotations

from core.eval.errors import EvalError


class GatewayError(EvalError, RuntimeError):
    """The root of the model gateway's errors."""


def answer_status(upstream_status: int | None) -> int:
    """The status the gateway answers a rollout with for an upstream failure (as official).

    A 4xx is the caller's problem and is passed on as it is; anything else (a 5xx, a
    redirect, no answer at all) is the gateway's bad gateway.
    """
    if upstream_status is not None and 400 <= upstream_status < 500:
        return upstream_status
    return 502


class UpstreamError(GatewayError):
    """One model call failed.

    `status` is the upstream's own HTTP status, None when it never answered; `answer` is what
    the gateway answers the rollout with (`answer_status(status)` unless said otherwise: a
    timeout is answered 408, as LiteLLM reports one); `unreachable` says the upstream could
    not be connected to at all.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None,
        answer: int | None = None,
        unreachable: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.answer = answer_status(status) if answer is None else answer
        self.unreachable = unreachable

    @classmethod
    def bad_request(cls, message: str) -> UpstreamError:
        """A request the gateway refuses to forward (answered 400, nothing was sent)."""
        return cls(message, status=None, answer=400)


class PreflightError(GatewayError):
    """The preflight call showed that the run's model cannot be used."""


class LiteLLMUnavailable(GatewayError):
    """LiteLLM is needed for `model_path` and is not installed."""


__all__ = [
    "GatewayError",
    "LiteLLMUnavailable",
    "PreflightError",
    "UpstreamError",
    "answer_status",
]
