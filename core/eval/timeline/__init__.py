"""When things happened in a run: its time line, for the dashboard's timeline (`w`) and for
any other picture of the run (a report of a finished run draws from the same model).

`model` holds `RunTimeline`: each rollout's span in flight with its server and how it ended,
max-in-flight over time, what the servers were doing, and the markers of what the user did
and of the stuck flags; it answers "which rollouts were in flight at t" and the per-column
figures a picture needs. It is filled from a recording (`recorded`: a run folder's
transitions.jsonl and calls.jsonl, or an official run folder's time line), or followed live
from a board (`followed`). No Textual here, and no HTTP stack. Door: `RunTimeline`,
`timeline_of_recording` and `BoardTimeline`.
"""
