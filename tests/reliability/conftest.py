"""Fixtures of the reliability tests (issue 7). Their helpers are the plain modules beside this
one: counts.py (the CI/full switch), in_process.py (servers on the test's event loop and
in-process evals), proxy.py (a TCP proxy that misbehaves) and filesystems.py (ones that fail).

Everything binds 127.0.0.1, every wait is bounded, and only processes these tests started are
ever signalled (by PID).
"""

from __future__ import annotations

# The session-scoped `serve --demo` of the eval tests, shared rather than started again, and
# their copy of the workspace fixture (the kill loops launch its rollout server).
from tests.eval.runs.conftest import demo_server, workspace  # noqa: F401
