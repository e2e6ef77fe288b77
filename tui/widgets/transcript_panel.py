"""One rollout's transcript, following it as it runs: the transcript screen's body (`t`) and
the full view's Transcript tab (`d`).

While the rollout runs, the transcript is its live preview (PROTOCOL.md §8.2), looked at once
a second and redrawn only when the file holds a new one. Once the rollout has finished with a
sample that holds its messages, that sample is shown instead: it is the whole conversation,
where the preview keeps only the latest steps (and the official server's last preview may lack
the final answer). Without either, the panel says why.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from core.eval.final_transcript import sample_transcript, trajectory_transcript
from core.rollout_record import RolloutRecord
from core.transcript import PREVIEW_MISSING, PreviewWatcher, Transcript, preview_path
from core.types import RolloutResultResponse
from tui.sources.base import DashboardSource
from tui.widgets.transcript import Shown, TranscriptView, header, steps

POLL_SEC = 1.0
NO_PREVIEWS = "no transcript: this run has no live previews, and the rollout has no final sample"
NO_PREVIEW_YET = (
    "no live preview yet: the server writes one every 3 s while the rollout runs, "
    "when its workflow shows its conversation"
)
NO_TRANSCRIPT = "no transcript: the rollout ended without messages in its result or a preview"


class TranscriptPanel(Vertical):
    """Whose transcript and where it came from, above its steps."""

    DEFAULT_CSS = """
    TranscriptPanel {
        height: 1fr;
    }
    TranscriptPanel #transcript-header {
        height: auto;
        padding: 0 1;
        border-bottom: solid $panel-lighten-2;
    }
    """

    def __init__(
        self,
        source: DashboardSource,
        record: RolloutRecord,
        *,
        wall_clock: Callable[[], float] = time.time,
        **kwargs: str,
    ) -> None:
        """`wall_clock` tells the preview's age (its `updated_at` is the server's wall clock)."""
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.source = source
        self.record = record
        self.wall_clock = wall_clock
        self.watcher: PreviewWatcher | None = None
        # The transcript the steps were last drawn from, in a box (None: nothing drawn yet).
        self._drawn: tuple[Transcript | None] | None = None
        self._sample_of: RolloutResultResponse | None = None
        self._sample: Transcript | None = None
        self._trajectory_read: Transcript | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="transcript-header")
        yield TranscriptView(id="transcript-view")

    def on_mount(self) -> None:
        self.refresh_transcript()
        self.set_interval(POLL_SEC, self.refresh_transcript)

    def refresh_transcript(self) -> None:
        """Look again; redraw the steps only when they changed (the header's age always)."""
        shown = self._current()
        self.query_one("#transcript-header", Static).update(header(shown, self.wall_clock()))
        transcript = shown.transcript
        if self._drawn is None or self._drawn[0] is not transcript:
            self._drawn = (transcript,)
            body = "" if transcript is None else steps(transcript, self.record.redact)
            self.query_one(TranscriptView).show(body)

    def _current(self) -> Shown:
        rollout_id = self.record.rollout_id
        final = self._final_sample() or self._trajectory()
        if final is not None:
            return Shown(rollout_id, final)
        watcher = self._watcher()
        if watcher is None:
            return Shown(rollout_id, None, NO_PREVIEWS)
        watcher.poll()
        if watcher.transcript is not None:
            return Shown(rollout_id, watcher.transcript, watcher.problem)
        if watcher.problem != PREVIEW_MISSING:
            return Shown(rollout_id, None, f"no transcript: {watcher.problem}")
        return Shown(rollout_id, None, NO_TRANSCRIPT if self.record.finished else NO_PREVIEW_YET)

    def _final_sample(self) -> Transcript | None:
        """The finished rollout's sample as a transcript, when it holds messages (built once
        per result)."""
        result = self.record.latest_result
        if not self.record.finished or result is None:
            return None
        # Compared by value: a finished rollout's result is parsed anew for each reader.
        if result != self._sample_of:
            self._sample_of = result
            self._sample = sample_transcript(self.record)
        return self._sample

    def _trajectory(self) -> Transcript | None:
        """A finished rollout's conversation as its server left it in the run folder (the
        official server's result carries no messages, and its last preview may lack the final
        answer): looked for until found, then kept (the file no longer changes)."""
        if self._trajectory_read is None:
            self._trajectory_read = trajectory_transcript(self.record, self.source.trials_root)
        return self._trajectory_read

    def _watcher(self) -> PreviewWatcher | None:
        # A live run knows its preview root once it has opened its run folder.
        if self.watcher is None:
            root = self.source.preview_root
            path = None if root is None else preview_path(root, self.record.rollout_id)
            if path is not None:
                self.watcher = PreviewWatcher(path, root=root)
        return self.watcher
