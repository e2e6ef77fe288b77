"""Client-side exceptions with the official names (PROTOCOL.md §6.4)."""

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
