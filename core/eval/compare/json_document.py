"""`osmosis-tui compare --json`: a comparison as one JSON document (the README documents it).

Every key is always present, `null` where it has no value, so a script can read it without
guarding each key; classes come in the fixed order of `outcomes.CLASSES`, rows and items in
source-row order. The same two runs always give the same bytes (the statistics are seeded).
"""

from __future__ import annotations

from typing import Any, Literal

from core.eval.compare.compared_run import ComparedRun
from core.eval.compare.comparison import Comparison, RowSide
from core.eval.compare.statistics import METHOD, PairedDifference
from core.eval.compare.text_report import sentence

SCHEMA_VERSION = 1
MCNEMAR = "McNemar's exact test on the work items (one attempt per row)"


def comparison_document(comparison: Comparison, *, max_regressed: int | None) -> dict[str, Any]:
    """The document; `max_regressed` is `--fail-on-regression`'s N (None: not asked)."""
    regressed = comparison.count("regressed")
    tripped = max_regressed is not None and regressed > max_regressed
    statistics = comparison.statistics
    return {
        "schema_version": SCHEMA_VERSION,
        "operation": "compare",
        "status": "regressed" if tripped else "ok",
        "a": _run(comparison.a),
        "b": _run(comparison.b),
        "match": {
            "same_dataset": comparison.same_dataset,
            "rows_in_both": comparison.rows_in_both,
            "rows_compared": 0 if statistics.pass_rate is None else statistics.pass_rate.rows,
            "content_differs": comparison.content_differs,
            "content_unchecked": comparison.content_unchecked,
            "notes": comparison.notes,
        },
        "classes": {
            name: {
                "count": len(keys),
                "items": [{"source_row": row, "attempt": attempt} for row, attempt in keys],
            }
            for name, keys in comparison.classes.items()
        },
        "rows": [
            {
                "source_row": row.source_row,
                "content": row.content,
                "a": _side(row.a),
                "b": _side(row.b),
                "classes": dict(row.classes),
            }
            for row in comparison.rows
        ],
        "statistics": {
            "rows": 0 if statistics.pass_rate is None else statistics.pass_rate.rows,
            "pass_rate": _difference(statistics.pass_rate, statistics.mcnemar_p, "pass"),
            "mean_reward": _difference(statistics.mean_reward, None, "reward"),
        },
        "sentence": sentence(comparison),
        "gate": None
        if max_regressed is None
        else {"max_regressed": max_regressed, "regressed": regressed, "tripped": tripped},
    }


def _run(run: ComparedRun) -> dict[str, Any]:
    return {
        "name": run.name,
        "folder": str(run.folder.absolute()),
        "tool": run.tool,
        "model": run.model,
        "dataset_sha256": run.dataset_sha256,
        "rows": len(run.source_rows),
        "n": run.n,
        "work_items": run.work_items,
        "finished": len(run.results),
        "pass_threshold": run.threshold,
    }


def _side(side: RowSide | None) -> dict[str, Any] | None:
    if side is None:
        return None
    return {
        "attempts": side.attempts,
        "passes": side.passes,
        "mean_reward": side.mean_reward,
        "tokens": side.tokens,
        "duration_ms": side.duration_ms,
        "pass_at_k": None
        if side.pass_at_k is None
        else {str(k): value for k, value in side.pass_at_k.items()},
    }


def _difference(
    difference: PairedDifference | None, mcnemar_p: float | None, kind: Literal["pass", "reward"]
) -> dict[str, Any] | None:
    if difference is None:
        return None
    method = METHOD if kind == "reward" or mcnemar_p is None else f"{METHOD}; {MCNEMAR}"
    return {
        "a": difference.a,
        "b": difference.b,
        "difference": difference.difference,
        "ci95": [difference.low, difference.high],
        "method": method,
        "mcnemar_exact_p": mcnemar_p,
    }


__all__ = ["MCNEMAR", "SCHEMA_VERSION", "comparison_document"]
