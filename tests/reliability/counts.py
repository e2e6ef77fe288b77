"""The CI/full switch of the reliability tests (issue 7).

`OSMOSIS_SOAK=full` (set by `make soak`) runs the long soak, the SIGKILL loop and the fuzzers at
their full counts; CI runs the same tests at small counts.
"""

from __future__ import annotations

import os

FULL = os.environ.get("OSMOSIS_SOAK") == "full"


def scaled(ci: int, full: int) -> int:
    """`full` under `make soak` (OSMOSIS_SOAK=full), else the CI count."""
    return full if FULL else ci
