"""A text nested hundreds of levels deep in a dataset row and in its live preview (issue 30),
with the real eval and its dashboard in a pseudo-terminal: the row is opened every way (`enter`,
`t`, `d` and its transcript tab), the run goes on journaling, and SIGTERM ends it as documented
(exit 1, its results written). Before, the text's reader recursed past Python's limit and
Textual drew the traceback with its locals inside the run's loop for minutes: nothing journaled,
the signal unanswered, then the run died `running`."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import signal
import subprocess
from pathlib import Path

from tests.deep_content import nested_items_text
from tests.eval.runs.command import child_env, osmosis
from tests.eval.runs.servers import served_demo
from tests.polling import eventually_sync

START_TIMEOUT_SEC = 60.0
STEP_TIMEOUT_SEC = 30.0
# 700 levels of arrays and objects: Python's JSON parser still reads it, an unbounded reader of
# its items recursed about 1,050 frames deep (11 kB, within a preview's text bound).
DEEP_LEVELS = 350
# The demo server runs 8 rollouts at once: the deep row holds one slot, the others go through
# the other seven, one after another for about 25 s, so that the journal grows as the row is
# looked at.
OTHER_ROWS = 120
OTHER_ROW_SLEEP_SEC = 1.5
MARK = b"nested too deeply"


class Terminal:
    """The leader side of the eval's pseudo-terminal, read as the dashboard writes (a terminal
    nobody reads would block its writes)."""

    def __init__(self, leader: int) -> None:
        self.leader = leader
        self.seen = bytearray()

    def read(self) -> bytes:
        # Nothing yet (BlockingIOError), or the process let go of the terminal (EIO).
        with contextlib.suppress(OSError):
            self.seen.extend(os.read(self.leader, 65536))
        return bytes(self.seen)

    def press(self, key: bytes, *, then_shows: bytes, what: str) -> None:
        """Type `key` and wait until the screen draws `then_shows` after it."""
        self.read()
        self.seen.clear()
        os.write(self.leader, key)
        eventually_sync(lambda: then_shows in self.read(), what, timeout=STEP_TIMEOUT_SEC)


def journaled(folder: Path) -> int:
    events = folder / "events.jsonl"
    return len(events.read_bytes().splitlines()) if events.exists() else 0


def test_a_row_nested_hundreds_deep_is_opened_every_way_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    deep_row = {"user_prompt": nested_items_text(DEEP_LEVELS), "metadata": {"sleep": 300}}
    other = {"user_prompt": "What is 6 * 7?", "metadata": {"sleep": OTHER_ROW_SLEEP_SEC}}
    rows = [deep_row] + [other] * OTHER_ROWS
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    folder = tmp_path / ".osmosis/evals/deep"
    # The demo server in a process of its own, writing its live previews where the run reads
    # them (the demo that an eval embeds runs its own dataset only).
    with served_demo(_OSMOSIS_ROLLOUT_PREVIEW_ROOT=str(folder / "previews")) as server:
        code = _open_the_deep_row_every_way(tmp_path, folder, server.url, server.chat_url)
    assert code == 1
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["eval_run"]["status"] == "incomplete"
    assert len((folder / "index.jsonl").read_text().splitlines()) == journaled(folder)


def _open_the_deep_row_every_way(tmp_path: Path, folder: Path, url: str, chat_url: str) -> int:
    """Run the eval on the dashboard, open the deep row every way while it journals, then
    SIGTERM it; its exit status."""
    leader, follower = pty.openpty()
    os.set_blocking(leader, False)
    process = subprocess.Popen(
        osmosis(
            *("eval", "--dataset-file", "rows.jsonl", "--name", "deep", "--yes"),
            *("--server", url, "--chat-url", chat_url),
        ),
        cwd=tmp_path,
        env=child_env(
            TERM="xterm-256color",
            COLUMNS="150",
            LINES="45",
            XDG_CONFIG_HOME=str(tmp_path / "config"),  # the table in its submitted order
        ),
        stdin=follower,
        stdout=follower,
        stderr=follower,
        start_new_session=True,
    )
    os.close(follower)
    terminal = Terminal(leader)
    try:
        eventually_sync(
            lambda: b"osmosis-tui" in terminal.read() and folder.is_dir(),
            "the dashboard to draw",
            timeout=START_TIMEOUT_SEC,
        )
        # The deep row's live preview holds the text too (the server writes one within 3 s).
        eventually_sync(
            lambda: (
                terminal.read()
                and any(
                    b"the innermost text" in path.read_bytes()
                    for path in (folder / "previews").glob("*/preview.json")
                )
            ),
            "the deep row's live preview",
            timeout=START_TIMEOUT_SEC,
        )
        # The cursor is on the first row submitted: the deep one.
        terminal.press(b"\r", then_shows=MARK, what="the details pane's prompt")
        terminal.press(b"t", then_shows=MARK, what="the transcript's live preview")
        terminal.press(b"t", then_shows=b"Transcript", what="the transcript screen closed")
        terminal.press(b"d", then_shows=MARK, what="the full view's details")
        terminal.press(b"3", then_shows=MARK, what="the full view's transcript tab")
        opened = journaled(folder)
        eventually_sync(
            lambda: terminal.read() and journaled(folder) >= opened + 3,
            "the run to go on journaling with the deep row open",
            timeout=STEP_TIMEOUT_SEC,
        )
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        eventually_sync(
            lambda: terminal.read() and process.poll() is not None,
            "the run to end on SIGTERM",
            timeout=START_TIMEOUT_SEC,
        )
        return process.wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
