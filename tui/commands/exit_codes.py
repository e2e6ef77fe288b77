"""The exit statuses of `osmosis-tui`, one name each (EVAL.md §1, as `osmosis eval run`)."""

from __future__ import annotations

OK = 0
"""The command did what it was asked: a run completed, a list printed, a replay closed, the
user declined to start."""
NOT_DONE = 1
"""It could not: a run stopped before every work item finished (interrupted, servers gone),
another live run holds the name, a server or the model failed, nothing to attach to."""
BAD_INPUT = 2
"""Bad input (a flag, the config, the dataset, a results folder that cannot be used), said
with the file, line or flag at fault; nothing was started."""
INTERRUPTED = 130
"""Ctrl-C before the command could end its documented way (128 + SIGINT, as a shell says)."""


__all__ = ["BAD_INPUT", "INTERRUPTED", "NOT_DONE", "OK"]
