"""`ReportedBy`: whose a rollout is that nobody here sent, as its server's events tell.

Its own module, without imports, so that the results room (which loads no HTTP stack) reads
and writes it as the board keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReportedBy:
    """Whose a rollout is when nobody here sent it (`osmosis-tui watch`): the server that
    reported it in its ownership events (PROTOCOL.md §8.1), and what those events say of the
    caller (its run and namespace), each None when the events leave it out."""

    server_id: str
    server_name: str | None = None
    namespace: str | None = None
    run_id: str | None = None
    run_name: str | None = None

    @property
    def run(self) -> str | None:
        """Its run as the events name it: the run's name, else its id; None for a caller
        that names neither."""
        return self.run_name or self.run_id

    def texts(self) -> tuple[str, ...]:
        """What the `/` filter looks for in: every name the events gave."""
        return tuple(
            text
            for text in (
                self.server_id,
                self.server_name,
                self.namespace,
                self.run_id,
                self.run_name,
            )
            if text
        )

    def fields(self) -> dict[str, str]:
        """Its names as a recording keeps them, those the events left out absent."""
        named = {
            "server_id": self.server_id,
            "server_name": self.server_name,
            "namespace": self.namespace,
            "run_id": self.run_id,
            "run_name": self.run_name,
        }
        return {key: value for key, value in named.items() if value is not None}


__all__ = ["ReportedBy"]
