"""The top of the compare screen: runs A and B, the sentence and the paired differences with
their method, what the pairing noticed (notes are shown, never hidden), and the class chips
with their counts and filter keys."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from core.eval.compare.compared_run import ComparedRun
from core.eval.compare.comparison import Comparison
from core.eval.compare.outcomes import CLASSES, ItemClass
from core.eval.compare.statistics import METHOD
from core.eval.compare.text_report import difference_lines, sentence
from tui.widgets.compare_table import CLASS_STYLES
from tui.widgets.format import plain

#: The key that filters the rows to each class: 1 … 9 in the order of the chips.
CLASS_KEYS: dict[ItemClass, str] = {name: str(key) for key, name in enumerate(CLASSES, start=1)}


def run_line(label: str, run: ComparedRun) -> Text:
    """ "A  name  tool · model · 10 rows × 2 · 20/20 done · pass ≥ 1" (the reward a pass
    needs)."""
    facts = (
        f"  {run.tool} · {run.model or 'model unknown'} · {len(run.source_rows):,} rows × "
        f"{run.n} · {len(run.results):,}/{run.work_items:,} done · pass ≥ {run.threshold:g}"
    )
    return Text.assemble((f"{label}  ", "bold"), plain(run.name, "bold"), plain(facts))


def header_lines(comparison: Comparison) -> Group:
    lines: list[Text] = [run_line("A", comparison.a), run_line("B", comparison.b)]
    lines.append(Text(sentence(comparison), "bold", overflow="fold"))
    statistics = comparison.statistics
    shown = [
        *difference_lines("pass rate", statistics.pass_rate, percent=True),
        *difference_lines("mean reward", statistics.mean_reward, percent=False),
    ]
    # Their columns' padding is --plain's: on the screen it would only wrap them at 80.
    lines += [Text(" ".join(line.split()), overflow="fold") for line in shown]
    if statistics.pass_rate is not None:
        method = METHOD
        if statistics.mcnemar_p is not None:
            method += f"; McNemar exact p {statistics.mcnemar_p:.4g}"
        lines.append(Text(method, "dim", overflow="fold"))
    notes = [f"note: {note}" for note in comparison.notes]
    for rows, what in (
        (comparison.content_differs, "whose content differs"),
        (comparison.content_unchecked, "whose content could not be checked"),
    ):
        if rows:
            count = f"{len(rows):,} row" + ("" if len(rows) == 1 else "s")
            notes.append(f"note: {count} {what}: listed, not compared")
    lines += [plain(note, "yellow", wrap=True) for note in notes]
    return Group(*lines)


class CompareHeader(Static):
    """Runs A and B, the verdict and its statistics, the notes."""

    DEFAULT_CSS = """
    CompareHeader {
        height: auto;
        padding: 0 1;
        background: $panel;
    }
    """

    def show(self, comparison: Comparison) -> None:
        self.update(header_lines(comparison))


def chips(comparison: Comparison, chosen: ItemClass | None) -> Text:
    """A chip per class: its key, its name and its count of work items; the chosen one (the
    filter) in reverse, classes without items muted."""
    text = Text(no_wrap=False, overflow="fold")
    text.append("0 all", "reverse bold" if chosen is None else "bold")
    for name in CLASSES:
        count = comparison.count(name)
        style = CLASS_STYLES.get(name, "") if count else "dim"
        if name == chosen:
            style = f"{style} reverse bold"
        text.append("  ")
        text.append(f"{CLASS_KEYS[name]} {name} {count:,}", style)
    return text


class ClassChips(Static):
    """The class chips (`chips`)."""

    DEFAULT_CSS = """
    ClassChips {
        height: auto;
        padding: 0 1;
    }
    """

    def show(self, comparison: Comparison, chosen: ItemClass | None) -> None:
        self.update(chips(comparison, chosen))
