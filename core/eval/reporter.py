"""What `osmosis-tui eval` prints: a line per finished work item while it runs, then the end of
the run (EVAL.md §2, §8) in one of three output modes.

- `rich` (the default): the failed rows (each with its source row and trial folder), the
  results table, the outcome, and the commands that resume or retry the run;
- `plain` (`--plain`): the same facts without the rule and the box, one `label: value` a line;
- `json` (`--json`): stdout holds one line, the official-shaped envelope
  (`EvalSummary.envelope`); progress goes to stderr.

Text from servers and models (error types, problems) goes through `terminal_safe`.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from core.board import RolloutBoard
from core.eval.compare.baseline import BaselineCounts, BaselineTally
from core.eval.cost.spend import Spend
from core.eval.duration_text import duration
from core.eval.plan.prepare import EvalPlan
from core.eval.results.records import ItemResult
from core.eval.safe_text import terminal_safe
from core.eval.summary import OURS, EvalSummary
from core.types import RolloutStatus

OutputMode = Literal["rich", "plain", "json"]
#: Failed rows listed at the end of a run; the rest are counted (index.jsonl has them all).
FAILED_ROWS_SHOWN = 50
#: The official tool's upload command (our folders are in its shape).
UPLOAD_COMMAND = "osmosis eval upload"
_RULE_WIDTH = 72


def item_line(result: ItemResult, done: int, total: int) -> str:
    width = len(str(total))
    reward = "" if result.reward is None else f"reward {result.reward:g}"
    error = "" if result.error_type is None else terminal_safe(result.error_type)[:60]
    duration = "" if result.duration_ms is None else f"{result.duration_ms:.0f} ms"
    tokens = "" if result.tokens is None else f"{result.tokens:,} tok"
    return (
        f"[{done:>{width}}/{total}] source row {result.source_row_index} run "
        f"{result.run_index}  {result.status:<7}  {reward or error:<24} {duration:>9} "
        f"{tokens:>10}  {result.rollout_id[:12]}"
    )


def display_path(path: Path) -> str:
    """A path as the user reads it: from the current directory when inside it, else absolute."""
    absolute = path.absolute()
    try:
        return str(absolute.relative_to(Path.cwd())) or "."
    except ValueError:
        return str(absolute)


@dataclass(frozen=True)
class RunReport:
    """The end of one run, in every output mode."""

    summary: EvalSummary
    plan: EvalPlan
    dispatched: int
    """Rollouts this invocation started for work items."""
    rerun: str
    """The command that repeats this run's inputs, without `--name` (shell-quoted)."""
    cancelled_pending: int = 0
    """Work items left pending because the user cancelled their rollout (from a dashboard or
    a viewer): a cancelled rollout has no result."""
    versus: BaselineCounts | None = None
    """With `--baseline`: the run's results counted against it."""
    spend: Spend | None = None
    """What the run spent on its model, projected and may spend (`core.eval.cost.spend`)."""

    @classmethod
    def of(
        cls,
        summary: EvalSummary,
        plan: EvalPlan,
        board: RolloutBoard,
        rerun: str,
        spend: Spend | None = None,
    ) -> RunReport:
        """The report of the run whose board is `board` (hand-made rollouts aside), and its
        `spend` when the session's budget keeper is at hand."""
        items = [record for record in board if not record.manual]
        cancelled = {
            (record.row_index, record.run_index)
            for record in items
            if record.status == RolloutStatus.CANCELLED and record.cancels
        }
        pending = cancelled - summary.results.keys()
        baseline = plan.baseline
        versus = None
        if baseline is not None:
            versus = BaselineTally(baseline, summary.results.values()).counts()
        return cls(summary, plan, len(items), rerun, len(pending), versus, spend)

    def message(self) -> str:
        summary = self.summary
        where = display_path(summary.folder)
        name = summary.run_name
        if summary.complete and self.dispatched == 0 and summary.total_items > 0:
            return f"Run {name} already had every result, so nothing ran: {where}"
        if summary.complete:
            return f"Run {name} finished: {where}"
        if summary.cancelled:
            return f"Run {name} interrupted: {where}"
        cancelled = self.cancelled_pending
        if cancelled and cancelled == summary.pending and summary.problem is None:
            # What the user did (the demo's stuck rows cancelled), not a failure of the run.
            items = "work item" if cancelled == 1 else "work items"
            return (
                f"Run {name} ended with the {cancelled} {items} you cancelled left pending "
                f"(a cancelled rollout has no result): {where}"
            )
        return f"Run {name} stopped before every work item finished: {where}"

    def hints(self) -> list[str]:
        """The commands to go on from here, each with what it does."""
        summary, name = self.summary, shlex.quote(self.summary.run_name)
        hints: list[str] = []
        if summary.complete and self.dispatched == 0 and summary.total_items > 0:
            hints.append(f"Start another run of the same inputs: {self.rerun}")
            hints.append(
                f"Start this name over (its results are archived first): {self.rerun} "
                f"--name {name} --fresh"
            )
        spend = self.spend
        if not summary.complete and spend is not None and spend.state == "reached":
            # The same budget would stop the resume at once: it needs a higher one.
            hints.append(
                f"Resume the pending work items with a budget above the "
                f"${spend.spent_usd or 0:.4f} spent: {without_budget(self.rerun)} --name "
                f"{name} --budget USD"
            )
        elif not summary.complete:
            hints.append(f"Resume the pending work items: {self.rerun} --name {name}")
        if summary.count("failed"):
            hints.append(f"Run the failures again: {self.rerun} --name {name} --retry-failed")
        baseline = self.plan.baseline
        if baseline is not None and self.versus is not None and self.versus.compared:
            hints.append(
                "See what changed from the baseline, row by row: "
                + shlex.join(
                    [
                        "osmosis-tui",
                        "compare",
                        display_path(baseline.folder),
                        display_path(summary.folder),
                    ]
                )
            )
        if summary.complete and self.plan.workspace is not None:
            # The official upload needs a workspace (and the Platform): only said for one.
            replace = " --replace" if self.plan.request.retry_failed else ""
            hints.append(
                f"Upload with the official CLI: {UPLOAD_COMMAND} {self._upload_arg()}{replace}"
            )
        return hints

    def _upload_arg(self) -> str:
        """The bare run name when the folder is the workspace's default one, else its path."""
        folder = self.summary.folder.absolute()
        workspace = self.plan.workspace
        if workspace is not None and folder == workspace / ".osmosis" / "evals" / folder.name:
            return folder.name
        shown = display_path(folder)
        return shown if "/" in shown else str(folder)  # a bare name would mean a run name

    def envelope(self) -> dict[str, Any]:
        document = self.summary.envelope(
            message=self.message(),
            dispatched=self.dispatched,
            dataset_source=self.plan.dataset_source,
            workspace=self.plan.workspace,
        )
        spend = self.spend
        if spend is not None:
            # Ours, in our key, as the baseline's: the official keys stay as they are.
            document[OURS]["spend"] = {
                "spent_usd": spend.spent_usd,
                "projected_usd": spend.projected_usd,
                "budget_usd": spend.budget_usd,
                "budget_state": spend.state,
                "price_source": self.plan.price.source,
            }
        baseline = self.plan.baseline
        if baseline is not None and self.versus is not None:
            # Ours, so in our key: the official envelope's keys stay as they are.
            document[OURS]["baseline"] = {
                "run": baseline.name,
                "folder": str(baseline.folder.resolve()),
                **self.versus.as_json(),
            }
        return document

    def text(self, *, plain: bool) -> str:
        """Failed rows, results, outcome and commands: with a rule and a box, or `plain`."""
        lines = list(self._failed_lines(plain=plain))
        facts = list(self._facts())
        if plain:
            lines += [f"{label.lower()}: {value}" for label, value in facts]
        else:
            lines += _boxed(self._title(), facts)
        if self.summary.problem:
            lines.append(f"stopped: {terminal_safe(self.summary.problem)}")
        lines.append(self.message())
        lines += self.hints()
        return "\n".join(lines)

    def _title(self) -> str:
        summary = self.summary
        if summary.cancelled:
            return "Results (interrupted)"
        return "Results" if summary.complete else "Results (incomplete)"

    def _failed_lines(self, *, plain: bool) -> Iterator[str]:
        failed = self.summary.failed_rows()
        if not failed:
            return
        if not plain:
            yield "── Failed rows " + "─" * (_RULE_WIDTH - 15)
        for result in failed[:FAILED_ROWS_SHOWN]:
            why = result.error_type or "?"
            if result.status == "skipped":
                why = "skipped"
            trials = self.summary.trial_dir(result)
            where = display_path(trials) if trials.is_dir() else f"rollout {result.rollout_id}"
            prefix = "failed: " if plain else ""
            yield (
                f"{prefix}source row {result.source_row_index} run {result.run_index}: "
                f"{terminal_safe(why)} -> {terminal_safe(where)}"
            )
        if len(failed) > FAILED_ROWS_SHOWN:
            yield f"... and {len(failed) - FAILED_ROWS_SHOWN} more (see index.jsonl)"

    def _facts(self) -> Iterator[tuple[str, str]]:
        summary, metrics = self.summary, self.summary.metrics
        yield "Run", summary.run_name
        items = [
            f"{len(summary.results)}/{summary.total_items} done",
            f"{summary.count('success')} ok",
            f"{summary.count('failed')} failed",
        ]
        if summary.count("skipped"):
            items.append(f"{summary.count('skipped')} skipped")
        if summary.pending:
            items.append(f"{summary.pending} pending")
        if summary.resumed:
            items.append(f"{summary.resumed} from before")
        yield "Work items", " · ".join(items)
        threshold = f"threshold {metrics['pass_threshold']:g}"
        yield (
            "Pass rate",
            # A run with no result has no rate: 0.0 % would read as every sample failing.
            f"- (no sample finished, {threshold})"
            if not metrics["completed_samples"]
            else (
                f"{metrics['pass_rate'] * 100:.1f}% ({metrics['passed']}/"
                f"{metrics['completed_samples']} samples, {threshold})"
            ),
        )
        stats = metrics.get("reward_stats") or {}
        if stats.get("mean") is not None:
            yield (
                "Reward",
                " · ".join(f"{key} {stats[key]:.3f}" for key in ("mean", "median", "min", "max")),
            )
        if metrics.get("pass_at_k"):
            yield "pass@k", " · ".join(f"k={p['k']} {p['value']:.2f}" for p in metrics["pass_at_k"])
        baseline = self.plan.baseline
        if baseline is not None and self.versus is not None:
            yield "Vs baseline", f"{terminal_safe(baseline.name)}: {self.versus.said()}"
        yield "Tokens", f"{metrics['tokens_used']:,}"
        yield "Duration", duration(summary.duration_ms / 1000)
        yield "Output", terminal_safe(display_path(summary.folder))


def _boxed(title: str, facts: Sequence[tuple[str, str]]) -> list[str]:
    """`facts` as a two-column box with `title` centred above it."""
    left = max(len(label) for label, _ in facts)
    right = max(len(value) for _, value in facts)
    width = left + right + 7
    lines = [title.center(width).rstrip()]
    lines.append(f"╭{'─' * (left + 2)}┬{'─' * (right + 2)}╮")
    lines += [f"│ {label:<{left}} │ {value:<{right}} │" for label, value in facts]
    lines.append(f"╰{'─' * (left + 2)}┴{'─' * (right + 2)}╯")
    return lines


class HeadlessReporter:
    """Prints progress to `stream`; in `json` mode stdout carries only the final envelope."""

    def __init__(self, *, mode: OutputMode, stream: TextIO | None = None) -> None:
        self.mode = mode
        # Progress goes to stderr when stdout must hold nothing but the JSON document.
        self.stream = stream or (sys.stderr if mode == "json" else sys.stdout)
        self.done = 0
        self.total = 0

    def start(self, run_name: str, total: int, already_done: int) -> None:
        self.total = total
        self.done = 0
        resumed = f" ({already_done} done before)" if already_done else ""
        print(f"eval {run_name}: {total} work items to run{resumed}", file=self.stream, flush=True)

    def result(self, result: ItemResult) -> None:
        self.done += 1
        print(item_line(result, self.done, self.total), file=self.stream, flush=True)

    def notice(self, message: str) -> None:
        print(f"! {terminal_safe(message)}", file=self.stream, flush=True)

    def finish(self, report: RunReport) -> None:
        print_report(report, self.mode, stream=self.stream)


def print_report(report: RunReport, mode: OutputMode, *, stream: TextIO | None = None) -> None:
    """The end of the run: the envelope on stdout in `json` mode, else the text on `stream`."""
    if mode == "json":
        # ASCII-only: a hostile string in an error type cannot steer the terminal this way.
        print(json.dumps(report.envelope()), flush=True)
    else:
        print(report.text(plain=mode == "plain"), file=stream or sys.stdout, flush=True)


def without_budget(command: str) -> str:
    """`command` (a shell line of `osmosis-tui eval`) without its `--budget` and the value."""
    words = shlex.split(command)
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "--budget":
            skip = True
        elif not word.startswith("--budget="):
            kept.append(word)
    return shlex.join(kept)
