"""The results folder of an eval run (EVAL.md §6), one module per file kind.

`folder` opens `<output>/<run-name>/` and writes its manifest; `events` is the fsync'd journal
(`events.jsonl`), `transitions` the replay log, `index` and `metrics` the summaries written at
the end, `logs` the redacted `logs.txt`. `records` holds the work items and results they
record, `durable` the write helpers they share.

These modules import only the standard library, each other, `core.eval.redact` and
`core.eval.errors`, never the HTTP stack (httpx, aiohttp, pydantic): a process that only
touches a results folder, such as the SIGKILL tests' journal writer, need not load it. Import
a name from the module that holds it; this package re-exports nothing.
"""
