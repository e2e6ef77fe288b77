"""The results folder of an eval run (EVAL.md §8): every file of it written and read here, one
module per file kind.

In the official shapes (osmosis-ai 0.3.8), so that either tool resumes the other's runs and
the official upload accepts ours: `folder` opens `<output>/<run-name>/` and names its files,
`manifest` is its resume lock (with `source_digest` and `provenance` for two of its parts),
`lock` keeps a second run of the same name out, `events` is the fsync'd journal, `snapshots`
rewrites `index` (index.jsonl and summary.jsonl), `progress`, `metrics` and the `projections`
of what the rollout server left in `rollout_trials/` (`trials`), and `logs` is the redacted
`logs.txt`. Ours besides: `transitions` (the replay log) and `calls` (calls.jsonl), each
written and read by its own module, played together by `recording`; `official_timeline`, the
time line of a folder without them; `export`, the dashboard's export. `records` holds the work
items and results they record, `durable` the write helpers they share.

These modules import the standard library, each other, the eval's shared helpers (`errors`,
`redact`, `untrusted_json`, `token_counts`) and the protocol's status and phase values, never
the HTTP stack (httpx, aiohttp): a process that only touches a results folder, such as the
SIGKILL tests' journal writer or `osmosis-tui runs`, need not load it (a test checks it). Import
a name from the module that holds it; this package re-exports nothing.
"""
