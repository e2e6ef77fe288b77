"""Polling-lease bookkeeping, one implementation for both sides (PROTOCOL.md §5.2, §6.3).

A lease is a deadline on the monotonic clock that each successful poll pushes out by a fixed
length. The client renews from the *start* of its last successful poll (only then is it sure the
server saw the request); the server renews from the request's arrival and fails the rollout when
the deadline passes unrenewed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable


class Lease:
    """A deadline that renewals move to `renewal time + length`."""

    __slots__ = ("deadline", "length_sec")

    def __init__(self, length_sec: float, *, start: float | None = None) -> None:
        self.length_sec = length_sec
        self.deadline = (time.monotonic() if start is None else start) + length_sec

    def renew(self, at: float) -> None:
        self.deadline = at + self.length_sec

    def remaining(self, now: float | None = None) -> float:
        return self.deadline - (time.monotonic() if now is None else now)

    def expired(self, now: float | None = None) -> bool:
        return self.remaining(now) <= 0

    def fits(self, span_sec: float, now: float | None = None) -> bool:
        """Whether something lasting `span_sec` from `now` would end before the deadline."""
        return span_sec < self.remaining(now)


class ServerLease(Lease):
    """The server's side: an opaque token (only its digest kept) and an expiry timer.

    The timer is armed once per lease length rather than re-armed on every poll: when it fires
    it checks the current deadline and re-arms itself if a renewal moved it.
    """

    __slots__ = ("_digest", "_on_expire", "_timer")

    def __init__(self, length_sec: float, on_expire: Callable[[], None]) -> None:
        super().__init__(length_sec)
        self._digest = b""
        self._on_expire = on_expire
        self._timer: asyncio.TimerHandle | None = None

    def issue_token(self) -> str:
        token = secrets.token_urlsafe(32)
        self._digest = hashlib.sha256(token.encode()).digest()
        return token

    def authenticate(self, token: str) -> bool:
        candidate = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        return hmac.compare_digest(candidate, self._digest)

    def arm(self) -> None:
        loop = asyncio.get_running_loop()
        # loop.time() is time.monotonic() on the default loops, the clock the deadline uses.
        self._timer = loop.call_at(loop.time() + self.remaining(), self._fire)

    def stop(self) -> None:
        """Stop expiring (the result is published); the token still authenticates."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        if self.expired():
            self._on_expire()
        else:
            self.arm()
