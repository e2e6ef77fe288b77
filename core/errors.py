"""The rollout client's errors, with the official names (PROTOCOL.md §6.4), as one tree.

    RuntimeError
    └── RolloutProtocolError          a peer answered with an unexpected status or a
                                      malformed body (`status_code` says which)
    TimeoutError
    └── RolloutAdmissionTimeoutError  the client-side admission deadline passed

Besides these, a call passes on what the layer below raises (httpx's `HTTPError`s, `OSError`),
and awaiting a handle stopped locally raises `asyncio.CancelledError`. `describe_error` says
any of them in one line.
"""

from __future__ import annotations


class RolloutProtocolError(RuntimeError):
    """A peer answered with an unexpected status or a malformed body.

    `status_code` is the status of the offending response (200/202 for body problems).
    """

    def __init__(self, message: str, *, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class RolloutAdmissionTimeoutError(TimeoutError):
    """The client-side admission deadline (`admission_timeout_sec`) passed."""


def describe_error(exc: BaseException) -> str:
    """A one-line description of a failed call for humans."""
    if isinstance(exc, RolloutProtocolError):
        return str(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
