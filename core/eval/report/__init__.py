"""The report room: a finished run as one self-contained HTML page, for someone without a
terminal (`osmosis-tui report RUN`).

It draws what the dashboard shows of a run, from the same models: the run timeline
(`core.eval.timeline`), the distributions (`core.eval.timing`), a row per rollout and the
failures with their conversations, from the board a replay of the run folder ends with. The
pictures are inline SVG and the page fetches nothing (a Content-Security-Policy says so to the
browser); every text from the run is escaped and made safe. No Textual here. Door: `RunReport`
in `run_report` and `render_report` in `page`.
"""
