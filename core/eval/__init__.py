"""The eval engine behind `osmosis-tui eval` (EVAL.md): from inputs to a results folder.

The front ends start here: `prepare(EvalRequest(...))` checks every input and returns an
`EvalPlan` (or raises `InputError` listing the problems), and `EvalSession(plan).run()` runs
it and returns an `EvalSummary` (or raises `RunFolderError` when the results folder cannot be
used, `RunLocked` when another run of the same name lives). The names load on first use
(PEP 562), so importing `core.eval` for one of them does not load the others' modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.eval.errors import EvalError, InputError
    from core.eval.plan.output_root import DEFAULT_OUTPUT
    from core.eval.plan.prepare import EvalPlan, EvalRequest, prepare
    from core.eval.results.folder import RunFolderError
    from core.eval.results.lock import RunLocked
    from core.eval.session import EvalSession
    from core.eval.summary import EvalSummary

# Each exported name and the module that defines it.
_HOMES = {
    "DEFAULT_OUTPUT": "core.eval.plan.output_root",
    "EvalPlan": "core.eval.plan.prepare",
    "EvalRequest": "core.eval.plan.prepare",
    "EvalSession": "core.eval.session",
    "EvalSummary": "core.eval.summary",
    "EvalError": "core.eval.errors",
    "InputError": "core.eval.errors",
    "RunFolderError": "core.eval.results.folder",
    "RunLocked": "core.eval.results.lock",
    "prepare": "core.eval.plan.prepare",
}

__all__ = [
    "DEFAULT_OUTPUT",
    "EvalError",
    "EvalPlan",
    "EvalRequest",
    "EvalSession",
    "EvalSummary",
    "InputError",
    "RunFolderError",
    "RunLocked",
    "prepare",
]

# Hidden from type checkers: a module-level __getattr__ would make every misspelt name pass
# as Any, while the imports above give them the real types.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # later lookups find it without coming here
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
