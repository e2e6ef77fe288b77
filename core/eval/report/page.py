"""`render_report`: the whole page, one HTML document that needs nothing else.

Its Content-Security-Policy lets it load nothing at all (no script, no font, no image but an
inline one): a report handed to someone opens the same offline, and text from the run that
slipped through as markup could still fetch nothing. The style is inline, on a light
background, with the system's own fonts.
"""

from __future__ import annotations

from core.eval.count_text import compact_count
from core.eval.duration_text import duration
from core.eval.report.failures import failures, is_failure
from core.eval.report.histograms_svg import histograms
from core.eval.report.markup import text
from core.eval.report.rows_table import rows_table
from core.eval.report.run_report import RunReport
from core.eval.report.timeline_svg import timeline_svg

POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

STYLE = """
:root { color-scheme: light; --ink: #1f2328; --muted: #59636e; --line: #d1d9e0;
  --paper: #ffffff; --wash: #f6f8fa; --success: #1a7f37; --failure: #cf222e;
  --cancelled: #bf8700; --not_admitted: #8250df; --untracked: #6e7781; --flight: #0969da; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--paper); color: var(--ink);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 36px 0 10px; padding-bottom: 4px;
  border-bottom: 1px solid var(--line); }
h3 { font-size: 14px; margin: 0 0 4px; }
.note { color: var(--muted); font-size: 13px; }
dl.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(124px, 1fr));
  gap: 10px; margin: 16px 0 0; }
dl.figures div { background: var(--wash); border: 1px solid var(--line); border-radius: 6px;
  padding: 8px 12px; white-space: nowrap; }
dl.figures dt { color: var(--muted); font-size: 12px; }
dl.figures dd { margin: 0; font-size: 20px; font-weight: 600; }
figure { margin: 0; }
svg { display: block; width: 100%; height: auto; font: 11px system-ui, sans-serif; }
svg .plot { fill: var(--wash); }
svg .label { fill: var(--muted); text-anchor: end; }
svg .label.strong { fill: var(--ink); font-weight: 600; }
svg line.axis, svg line.tick { stroke: var(--muted); stroke-width: 1; }
svg text.tick { fill: var(--muted); text-anchor: middle; }
svg .in-flight { fill: #9ec5fe; stroke: var(--flight); stroke-width: 1; }
svg .lane-flight { fill: #b6d4fe; stroke: var(--flight); stroke-width: 0.8; }
svg .limit { fill: none; stroke: var(--failure); stroke-width: 1.5; stroke-dasharray: 5 3; }
svg .state.down { fill: #ffcecb; }
svg .state.draining, svg .state.starting, svg .state.stopped { fill: #fff1b3; }
svg .refused { fill: var(--failure); }
svg .marker { fill: #57606a; }
svg .marker.stuck { fill: var(--failure); }
svg .bar { fill: #54aeff; }
svg .percentile { stroke: var(--ink); stroke-dasharray: 3 2; }
svg text.percentile { stroke: none; fill: var(--ink); font-size: 10px; }
svg text.percentile.end { text-anchor: end; }
svg .edge { fill: var(--muted); }
svg .edge.end { text-anchor: end; }
.outcome.success,
  .swatch.outcome.success { fill: var(--success); background: var(--success); }
.outcome.failure,
  .swatch.outcome.failure { fill: var(--failure); background: var(--failure); }
.outcome.cancelled,
  .swatch.outcome.cancelled { fill: var(--cancelled); background: var(--cancelled); }
.outcome.not_admitted,
  .swatch.outcome.not_admitted { fill: var(--not_admitted); background: var(--not_admitted); }
.outcome.untracked,
  .swatch.outcome.untracked { fill: var(--untracked); background: var(--untracked); }
ul.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; list-style: none; padding: 0;
  margin: 8px 0 0; font-size: 13px; color: var(--muted); }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
  margin-right: 5px; vertical-align: -1px; }
.swatch.in-flight { background: #9ec5fe; border: 1px solid var(--flight); }
.swatch.limit { height: 0; border-top: 2px dashed var(--failure); border-radius: 0;
  vertical-align: 3px; }
.swatch.state.down { background: #ffcecb; } .swatch.state.draining { background: #fff1b3; }
.swatch.refused, .swatch.marker.stuck { background: var(--failure); }
.swatch.marker { background: #57606a; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(320px, 1fr)); gap: 12px;
  align-items: start; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
.card .figures { margin: 2px 0 0; font-size: 13px; color: var(--muted); }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
caption { text-align: left; color: var(--muted); padding-bottom: 6px; }
th, td { padding: 3px 8px; border-bottom: 1px solid var(--line); text-align: left;
  vertical-align: top; }
th { background: var(--wash); position: sticky; top: 0; }
th.number, td.number { text-align: right; font-variant-numeric: tabular-nums; }
td.id, .id { font-family: ui-monospace, monospace; font-size: 12px; }
td.error { color: var(--failure); max-width: 360px; overflow-wrap: anywhere; }
.status.success { color: var(--success); } .status.failure { color: var(--failure); }
.status.cancelled { color: var(--cancelled); } .status.not_admitted { color: var(--not_admitted); }
ol#failures { padding-left: 24px; }
li.failure { margin-bottom: 14px; }
li.failure .head { margin: 0; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 4px 0;
  font: 12.5px/1.45 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
pre.message { color: var(--failure); background: #fff8f8; border-left: 3px solid var(--failure);
  padding: 4px 8px; }
details { margin: 4px 0 0; } summary { cursor: pointer; color: var(--flight); }
ol.steps { list-style: none; padding: 0 0 0 8px; border-left: 2px solid var(--line); }
li.step .role { margin: 8px 0 0; font-weight: 600; font-size: 13px; }
pre.reasoning { color: var(--muted); font-style: italic; }
pre.tool { color: #953800; }
ul.warnings { color: var(--muted); font-size: 13px; }
"""


def render_report(report: RunReport) -> str:
    """The page of `report`, as text (UTF-8 when written)."""
    title = f"osmosis-tui report: {report.name}"
    warnings = "".join(f"<li>{text(warning)}</li>" for warning in report.warnings)
    rows = rows_table(report.records, report.zero, report.timeline)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>{STYLE}</style></head><body><main>"
        f"<header><h1>{text(report.name)}</h1>"
        '<p class="note">A finished run, as osmosis-tui replays it from its folder.</p>'
        f"{_figures(report)}</header>"
        '<section><h2>Timeline</h2><p class="note">Rollouts in flight against max-in-flight, '
        "a lane per server, the finished rollouts by outcome and the markers; hover a bar for "
        f"its numbers.</p>{timeline_svg(report.timeline)}</section>"
        '<section><h2>Distributions</h2><p class="note">Each phase, the whole rollout, the '
        "model calls, tokens and reward, with their 50th, 95th and 99th percentiles.</p>"
        f"{histograms(report.records)}</section>"
        f"<section><h2>Failures</h2>{failures(report.records, report.transcript_of)}</section>"
        f"<section><h2>Rollouts</h2>{rows}</section>"
        + (
            f'<section><h2>Not read</h2><ul class="warnings">{warnings}</ul></section>'
            if warnings
            else ""
        )
        + "</main></body></html>\n"
    )


def _figures(report: RunReport) -> str:
    done = report.progress
    timeline = report.timeline
    tokens = sum(record.model.tokens or 0 for record in report.records)
    rate = "-" if done.pass_rate is None else f"{done.pass_rate:.1%}"
    mean = "-" if done.mean_reward is None else f"{done.mean_reward:.3f}"
    shown = [
        ("work items done", f"{done.done:,}/{done.total:,}"),
        ("passed", f"{done.passed:,}"),
        (f"pass rate (≥ {report.pass_threshold:g})", rate),
        ("mean reward", mean),
        ("rollouts", f"{len(report.records):,}"),
        ("failed", f"{sum(is_failure(record) for record in report.records):,}"),
        ("tokens", compact_count(tokens)),
        ("length", duration(timeline.end - timeline.start)),
    ]
    items = "".join(
        f"<div><dt>{text(name)}</dt><dd>{text(value)}</dd></div>" for name, value in shown
    )
    return f'<dl class="figures">{items}</dl>'
