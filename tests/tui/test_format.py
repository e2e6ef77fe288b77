"""The dashboard's formatting helpers: one duration format, and untrusted text on one line or
wrapped."""

from __future__ import annotations

import pytest

from core.eval.duration_text import duration
from core.eval.safe_text import multi_line
from tui.widgets.format import message_shown, one_line, plain


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "-"),
        (-1.0, "0.0s"),
        (0.04, "0.0s"),
        (0.05, "0.1s"),
        (9.94, "9.9s"),
        (9.97, "10s"),  # rounds into the next unit: never "10.0s"
        (10.0, "10s"),
        (59.4, "59s"),
        (59.6, "1m00s"),  # never "60s"
        (60.0, "1m00s"),
        (61.0, "1m01s"),
        (185.0, "3m05s"),
        (3599.4, "59m59s"),
        (3599.6, "1h00m"),
        (3661.0, "1h01m"),
        (7199.9, "2h00m"),
    ],
)
def test_duration_rounds_to_the_unit_it_shows(seconds: float | None, shown: str) -> None:
    assert duration(seconds) == shown


def test_durations_grow_with_the_time() -> None:
    """Rounding and the units agree: a longer time never reads shorter."""
    shown = [duration(tenth / 10) for tenth in range(0, 40_000, 7)]
    values = [_seconds(text) for text in shown]
    assert values == sorted(values)


def _seconds(text: str) -> float:
    if "h" in text:
        hours, minutes = text.rstrip("m").split("h")
        return int(hours) * 3600 + int(minutes) * 60
    if "m" in text:
        minutes, secs = text.rstrip("s").split("m")
        return int(minutes) * 60 + int(secs)
    return float(text.rstrip("s"))


def test_one_line_shows_line_breaks_and_tabs_as_spaces() -> None:
    assert one_line("What is\n12 * 3?\tthanks\r\n") == "What is 12 * 3? thanks  "
    assert one_line("a\x1bb") == "a\ufffdb"  # any other control: replaced, the width kept


def test_multi_line_keeps_the_line_breaks() -> None:
    assert (
        multi_line("What is\r\n12 * 3?\n\n\tthanks\x1b") == "What is\n12 * 3?\n\n    thanks\ufffd"
    )


def test_plain_wraps_on_the_texts_own_lines() -> None:
    assert plain("a\nb", wrap=True).plain == "a\nb"
    assert plain("a\nb").plain == "a b"


def test_a_message_shows_its_text_else_the_tools_it_calls() -> None:
    agents_item = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "391", "annotations": []}],
    }
    assert message_shown(agents_item) == "391"
    calls = {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "mul"}}]}
    assert message_shown(calls) == "tool calls: mul"
