"""Snapshot tests of the transcript view (`t`): a running rollout's live preview, with tool
calls, their answers and the server's truncation mark, at the dashboard's two small sizes.

Plain functions, as pytest-textual-snapshot runs the app itself; the states are in
`transcript_states.py` (a frozen wall clock tells the preview's age).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tui.transcript_states import (
    calculator_steps,
    open_transcript,
    preview,
    transcript_app,
    write_preview,
)


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=["100x30", "80x24"])
def test_transcript_snapshot(
    size: tuple[int, int],
    tmp_path: Path,
    snap_compare: Callable[..., bool],
    clean_terminal: None,
) -> None:
    write_preview(tmp_path, preview(calculator_steps(), version=7, truncated=True))
    assert snap_compare(transcript_app(tmp_path), terminal_size=size, run_before=open_transcript())
