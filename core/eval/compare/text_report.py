"""A comparison said in lines of text: what `osmosis-tui compare --plain` prints, and the one
sentence every view of a comparison leads with."""

from __future__ import annotations

from core.eval.compare.compared_run import ComparedRun, PairKey
from core.eval.compare.comparison import Comparison, RowComparison, RowSide, differing_rows
from core.eval.compare.outcomes import CHANGED, CLASSES
from core.eval.compare.statistics import LEVEL, METHOD, PairedDifference
from core.eval.duration_text import duration
from core.eval.safe_text import terminal_safe

#: Items named per class, and changed rows listed, before "… and N more" (--json has all).
ITEMS_SHOWN = 20
ROWS_SHOWN = 50
UNCHANGED = frozenset({"still_passing", "still_failing"})


def sentence(comparison: Comparison) -> str:
    """What changed, in one sentence: how many more (or fewer) work items B passes, and
    whether the paired interval says that is more than noise."""
    compared = comparison.compared_items
    unit = "rows" if comparison.one_attempt_per_row else "work items"
    difference = comparison.statistics.pass_rate
    if compared == 0 or difference is None:
        return "No work item finished in both runs yet: nothing to compare."
    gained = comparison.count("improved") - comparison.count("regressed")
    if gained == 0:
        change = f"B passes as many {unit} as A, of {compared:,} compared"
    else:
        more = "more" if gained > 0 else "fewer"
        change = f"B passes {abs(gained):,} {more} {unit} of {compared:,} compared"
    rates = f"{difference.a:.1%} → {difference.b:.1%}"
    if difference.within_noise:
        verdict = f"the difference is within noise at {LEVEL:.0%}"
    else:
        better = "better" if difference.difference > 0 else "worse"
        verdict = f"B is {better} than A beyond noise at {LEVEL:.0%}"
    return f"{change} ({rates}); {verdict}."


def report_lines(comparison: Comparison) -> list[str]:
    """The whole comparison, for a terminal without the dashboard or a log."""
    lines = [_run_line("A", comparison.a), _run_line("B", comparison.b)]
    lines += [f"note: {terminal_safe(note)}" for note in comparison.notes]
    if comparison.content_differs:
        lines.append(
            "rows whose content differs, not compared: " + _rows(comparison.content_differs)
        )
    if comparison.content_unchecked:
        lines.append(
            "rows whose content could not be checked, not compared: "
            + _rows(comparison.content_unchecked)
        )
    lines += ["", sentence(comparison), ""]
    statistics = comparison.statistics
    lines += difference_lines("pass rate", statistics.pass_rate, percent=True)
    lines += difference_lines("mean reward", statistics.mean_reward, percent=False)
    if statistics.mcnemar_p is not None:
        lines.append(f"{'McNemar exact p':<16}{statistics.mcnemar_p:.4g}")
    if statistics.pass_rate is not None:
        lines.append(f"method: {METHOD}")
    lines.append("")
    for name in CLASSES:
        keys = comparison.classes[name]
        # Items that stayed as they were are counted, not named: --json names them.
        named = "" if name in UNCHANGED else _items(keys, comparison)
        lines.append(f"{name:<14}{len(keys):>7,}  {named}".rstrip())
    changed = [row for row in differing_rows(comparison.rows) if row.changed]
    if changed:
        lines += [
            "",
            "rows that changed: passes, mean reward, tokens and mean duration, A → B",
        ]
        lines += [_row_line(row) for row in changed[:ROWS_SHOWN]]
        if len(changed) > ROWS_SHOWN:
            lines.append(f"… and {len(changed) - ROWS_SHOWN:,} more (--json lists every row)")
    return lines


def _run_line(label: str, run: ComparedRun) -> str:
    model = terminal_safe(run.model or "model unknown")
    return (
        f"{label}  {terminal_safe(run.name)}  ({run.tool}, {model}, "
        f"{len(run.source_rows):,} rows x {run.n}, {len(run.results):,} of "
        f"{run.work_items:,} finished, pass at reward >= {run.threshold:g})  "
        f"{terminal_safe(str(run.folder))}"
    )


def difference_lines(
    title: str, difference: PairedDifference | None, *, percent: bool
) -> list[str]:
    """A difference as one line: A's and B's means, B minus A, its interval and its rows
    (also the compare screen's header)."""
    if difference is None:
        return []

    def shown(value: float, signed: bool = False) -> str:
        if percent:
            points = value * 100
            return f"{points:+.1f}" if signed else f"{points:.1f}%"
        return f"{value:+.4g}" if signed else f"{value:.4g}"

    unit = " points" if percent else ""
    return [
        f"{title:<16}{shown(difference.a)} → {shown(difference.b)}   "
        f"{shown(difference.difference, True)}{unit}, {LEVEL:.0%} CI "
        f"[{shown(difference.low, True)}, {shown(difference.high, True)}] over "
        f"{difference.rows:,} rows"
    ]


def _listed(shown: list[str], total: int) -> str:
    """The first names (at most `ITEMS_SHOWN`), and how many more of `total` there are
    (--json has them all)."""
    more = total - len(shown)
    return ", ".join(shown) + (f", … and {more:,} more" if more > 0 else "")


def _rows(rows: list[int]) -> str:
    return _listed([str(row) for row in rows[:ITEMS_SHOWN]], len(rows))


def _items(keys: list[PairKey], comparison: Comparison) -> str:
    if not keys:
        return ""
    if comparison.one_attempt_per_row:
        return "rows " + _listed([str(row) for row, _ in keys[:ITEMS_SHOWN]], len(keys))
    shown = [f"{row}#{attempt}" for row, attempt in keys[:ITEMS_SHOWN]]
    return "row#attempt " + _listed(shown, len(keys))


def side_cells(side: RowSide | None) -> tuple[str, str, str, str]:
    """One run's side of a row as cells: passes of attempts, mean reward, tokens, mean
    duration (also the compare screen's table)."""
    if side is None:
        return ("-", "-", "-", "-")
    return (
        f"{side.passes}/{side.attempts}",
        "-" if side.mean_reward is None else f"{side.mean_reward:.3g}",
        "-" if side.tokens is None else f"{side.tokens:,}",
        "-" if side.duration_ms is None else duration(side.duration_ms / 1000),
    )


def _row_line(row: RowComparison) -> str:
    a, b = side_cells(row.a), side_cells(row.b)
    cells = "  ".join(f"{x} → {y}" for x, y in zip(a, b, strict=True))
    classes = ", ".join(
        f"{name} {count}" if count > 1 else name
        for name in CLASSES
        if (count := row.classes.get(name, 0)) and name in CHANGED
    )
    return f"  row {row.source_row:<6} {cells}  {classes}"


__all__ = [
    "ITEMS_SHOWN",
    "ROWS_SHOWN",
    "difference_lines",
    "report_lines",
    "sentence",
    "side_cells",
]
