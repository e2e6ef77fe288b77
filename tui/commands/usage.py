"""`UsageError`, bad input a subcommand found (exit 2), and the program's name it is told under."""

from __future__ import annotations

PROGRAM = "osmosis-tui"


class UsageError(Exception):
    """Bad input; the message names the flag, file, line or field. Exit status 2."""
