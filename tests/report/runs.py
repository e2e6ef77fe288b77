"""The run folders the report tests draw: a real demo run of our own (`osmosis-tui eval
--headless`, in a subprocess) and an official-shaped one written with the results room's own
writers (`tests.eval.compare.folders.write_run`), whose texts are hostile."""

from __future__ import annotations

from pathlib import Path

from tests.eval.compare.folders import FAIL, PASS, error, write_run
from tests.eval.runs.command import run_eval
from tests.eval.runs.files import run_folder

#: The demo's first rows: two fail at the model (rows 10 and 11), one is slow, the rest pass
#: or are answered wrong; none of the rows that take minutes.
DEMO_ROWS = 20
#: Text no page may carry as markup: a script, an image that would fetch, a quote that would
#: end an attribute, a bidi override that would reorder what follows.
HOSTILE = '<script>alert("x")</script><img src="http://example.invalid/a.png">\u202e"\'&'
HOSTILE_ERROR = "Boom" + HOSTILE


def demo_run(cwd: Path) -> Path:
    """A finished run of the zero-setup demo's first `DEMO_ROWS` rows."""
    done = run_eval("--headless", "--name", "demo", "--limit", str(DEMO_ROWS), cwd=cwd)
    assert done.returncode == 0, done.stderr
    return run_folder(cwd, "demo")


def hostile_run(folder: Path) -> Path:
    """An official run folder (a journal, no recording) of six rows: row 2 failed with a
    hostile error type, row 3 failed plainly, and every row's trajectory opens with a hostile
    question."""
    results = {
        (0, 0): PASS,
        (1, 0): FAIL,
        (2, 0): error(HOSTILE_ERROR),
        (3, 0): error("AgentError"),
        (4, 0): PASS,
        (5, 0): PASS,
    }
    prompts = {row: f"question {row}: {HOSTILE}" for row in range(6)}
    return write_run(folder, source_rows=list(range(6)), results=results, prompts=prompts)
