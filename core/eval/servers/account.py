"""What a run did with each of its servers, from the board's records: rollouts admitted (and
how many a second lately), in flight, not admitted, and failures by category. The servers
panel's lines, alike for a live run, an attached one and a replay (whatever the board holds);
what only the server's client knows (capacity, 429s, /health latency) comes with the server."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from core.board import NOT_ADMITTED_CATEGORY, failure_category_of
from core.rollout_record import RolloutRecord

#: Admissions per second are counted over this much of the latest time.
RATE_WINDOW_SEC = 10.0


@dataclass
class ServerAccount:
    """One server's share of the run."""

    admitted: int = 0
    in_flight: int = 0
    #: Admitted within the latest `RATE_WINDOW_SEC`.
    recent: int = 0
    #: Finished failures by category (`not admitted` among them).
    failures: Counter[str] = field(default_factory=Counter)

    @property
    def admitted_per_sec(self) -> float:
        return self.recent / RATE_WINDOW_SEC

    @property
    def not_admitted(self) -> int:
        return self.failures[NOT_ADMITTED_CATEGORY]


def server_accounts(records: Iterable[RolloutRecord], now: float) -> dict[str, ServerAccount]:
    """Each server's account (by the URL a record names), over `records` as of `now` (the
    board's clock)."""
    accounts: dict[str, ServerAccount] = {}
    since = now - RATE_WINDOW_SEC
    for record in records:
        account = accounts.get(record.server)
        if account is None:
            account = accounts[record.server] = ServerAccount()
        category = failure_category_of(record)
        if category is not None:
            account.failures[category] += 1
        if record.admission_error is not None:
            continue
        account.admitted += 1
        if record.in_flight:
            account.in_flight += 1
        if record.submitted_at >= since:
            account.recent += 1
    return accounts
