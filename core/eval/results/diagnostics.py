"""`rollout_trials/<rollout_id>/diagnostics.json`: the sub-phase timings a rollout server's
backend left beside a finished attempt (PROTOCOL.md §4.2 step 4).

The server writes the file when the result it saves carries `extra_fields`: the official
server's Harbor backend always does, as `{"backend": "harbor", "phase", "category",
"harbor_exception_type", "timings_sec": {"environment_setup", "agent_setup", "agent",
"verifier", "total"}}`, each a duration in seconds (no start times); its LocalBackend never
does, and neither does ours unless a custom backend returns them. What is read here is the
server's, so untrusted: at most `MAX_DIAGNOSTICS_BYTES`, a regular file not reached through a
symlink (`core.regular_file`), and of `timings_sec` only names with finite, non-negative
numbers, at most `MAX_TIMINGS` of them. Anything else is no diagnostics at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from core.eval.safe_text import replace_unsafe
from core.eval.untrusted_json import is_finite, load_json, text_of
from core.regular_file import read_document

DIAGNOSTICS_FILE = "diagnostics.json"
#: The largest diagnostics file read: Harbor's is a few hundred bytes.
MAX_DIAGNOSTICS_BYTES = 256 * 1024
#: The most sub-phase timings taken from one file; names are cut to `MAX_NAME_CHARS`.
MAX_TIMINGS = 16
MAX_NAME_CHARS = 40
#: The whole trial's own span among the timings (Harbor's `total`): not a sub-phase.
TOTAL = "total"
#: Harbor's sub-phases in the order they run; other names follow in the file's order.
HARBOR_ORDER = ("environment_setup", "agent_setup", "agent", "verifier")


@dataclass(frozen=True)
class TrialDiagnostics:
    """What a backend said of one attempt's time: its sub-phases' durations, in the order
    they ran, and the whole trial's when it gave one."""

    backend: str | None
    #: (name, seconds), in running order (Harbor's known order first).
    phases: tuple[tuple[str, float], ...]
    total: float | None


def diagnostics_path(trials_root: Path, rollout_id: str) -> Path:
    return trials_root / rollout_id / DIAGNOSTICS_FILE


def read_diagnostics(path: Path) -> TrialDiagnostics | None:
    """The timings in the diagnostics file at `path`; None when there is none, or it is not
    one (unreadable, too large, not JSON, no usable `timings_sec`)."""
    try:
        document = load_json(read_document(path, MAX_DIAGNOSTICS_BYTES))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    return diagnostics_of(document)


def diagnostics_of(document: Mapping[str, object]) -> TrialDiagnostics | None:
    """The timings of a diagnostics document (see the module's docstring)."""
    timings = document.get("timings_sec")
    if not isinstance(timings, dict):
        return None
    found: dict[str, float] = {}
    for key, value in timings.items():
        if len(found) >= MAX_TIMINGS:
            break
        name = replace_unsafe(str(key))[:MAX_NAME_CHARS].strip()
        if name and is_finite(value) and value >= 0:
            found.setdefault(name, float(value))
    total = found.pop(TOTAL, None)
    known = [(name, found.pop(name)) for name in HARBOR_ORDER if name in found]
    phases = (*known, *found.items())
    if not phases and total is None:
        return None
    backend = text_of(document.get("backend"))
    return TrialDiagnostics(
        backend=None if backend is None else replace_unsafe(backend)[:MAX_NAME_CHARS],
        phases=phases,
        total=total,
    )


__all__ = [
    "DIAGNOSTICS_FILE",
    "HARBOR_ORDER",
    "MAX_DIAGNOSTICS_BYTES",
    "MAX_TIMINGS",
    "TrialDiagnostics",
    "diagnostics_of",
    "diagnostics_path",
    "read_diagnostics",
]
