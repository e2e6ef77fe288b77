"""The headless front end: a line per finished work item, then the results table (EVAL.md §6)."""

from __future__ import annotations

import json
import sys
from typing import TextIO

from core.eval.results.records import ItemResult
from core.eval.safe_text import terminal_safe
from core.eval.summary import EvalSummary


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def item_line(result: ItemResult, done: int, total: int) -> str:
    width = len(str(total))
    reward = "" if result.reward is None else f"reward {result.reward:g}"
    error = "" if result.error_type is None else terminal_safe(result.error_type)[:60]
    duration = "" if result.duration_ms is None else f"{result.duration_ms} ms"
    tokens = "" if result.tokens is None else f"{result.tokens:,} tok"
    return (
        f"[{done:>{width}}/{total}] row {result.row_index} run {result.run_index}  "
        f"{result.status:<7}  {reward or error:<24} {duration:>9} {tokens:>10}  "
        f"{result.rollout_id[:12]}"
    )


def format_summary(summary: EvalSummary) -> str:
    metrics = summary.metrics
    stats = metrics["reward_stats"]
    lines = [
        f"Results of {summary.run_name} ({summary.status})",
        f"  work items  {len(summary.results)}/{summary.total_items} done: "
        f"{summary.count('success')} ok, {summary.count('failed')} failed, "
        f"{summary.count('skipped')} skipped, {summary.pending} pending"
        + (f" ({summary.resumed} from before)" if summary.resumed else ""),
        f"  pass rate   {metrics['pass_rate'] * 100:.1f} %  ({metrics['passed']} of "
        f"{metrics['completed_samples']}, reward >= {metrics['pass_threshold']:g})",
        f"  reward      mean {_number(stats['mean'])}  median {_number(stats['median'])}  "
        f"min {_number(stats['min'])}  max {_number(stats['max'])}",
    ]
    if metrics["pass_at_k"]:
        lines.append(
            "  pass@k      "
            + "  ".join(f"pass@{p['k']} {p['value']:.3f}" for p in metrics["pass_at_k"])
        )
    lines += [
        f"  tokens      {metrics['tokens_used']:,}",
        f"  duration    {summary.duration_ms / 1000:.1f} s",
        f"  output      {summary.folder}",
    ]
    if summary.problem:
        lines.append(f"  stopped     {terminal_safe(summary.problem)}")
    failed = summary.failed_rows()
    if failed:
        lines.append("Failed rows")
        lines += [
            f"  row {r.row_index} run {r.run_index}: {terminal_safe(r.error_type or '?')} "
            f"-> {r.rollout_id}"
            for r in failed[:50]
        ]
        if len(failed) > 50:
            lines.append(f"  ... and {len(failed) - 50} more (see index.jsonl)")
    return "\n".join(lines)


class HeadlessReporter:
    """Prints progress to `stream`; with `json_output`, stdout carries only the final JSON."""

    def __init__(self, *, json_output: bool, stream: TextIO | None = None) -> None:
        self.json_output = json_output
        # Progress goes to stderr when stdout must hold nothing but the JSON document.
        self.stream = stream or (sys.stderr if json_output else sys.stdout)
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

    def finish(self, summary: EvalSummary) -> None:
        if self.json_output:
            print(json.dumps(summary.to_json()), flush=True)
        else:
            print(format_summary(summary), file=self.stream, flush=True)
