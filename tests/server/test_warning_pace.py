"""A server's repeated warnings are paced (`core.serving.warning_pace`): a real
`osmosis-tui serve` flooded with bad requests on loopback, and the pace's rule on a clock."""

from __future__ import annotations

import logging
import signal
import socket
import subprocess

from core.serving.warning_pace import MAX_KINDS, WarningPace
from tests.eval.runs.command import child_env, osmosis

BAD_REQUESTS = 300
INVALID = "Invalid HTTP request received."


def _bad_request(port: int) -> bytes:
    """Send what is no HTTP request; the server's answer (its 400) is returned."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(b"\x00\x01 this is no request\r\n\r\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
        return answer


def test_a_flood_of_bad_requests_is_one_line_on_stderr() -> None:
    """600 bad requests used to print 600 warnings on an eval's stderr; each is still refused,
    and the warning is said once."""
    process = subprocess.Popen(
        osmosis("serve", "--demo", "--port", "0"),
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = 0
        for line in process.stdout:
            if line.startswith("rollout server: "):
                port = int(line.split()[2].rsplit(":", 1)[1].rstrip("/"))
                break
        assert port, "osmosis-tui serve --demo did not print its URL"
        answers = [_bad_request(port) for _ in range(BAD_REQUESTS)]
        assert all(answer.startswith(b"HTTP/1.1 400") for answer in answers)
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert stderr.count(INVALID) == 1, stderr


def _warning(text: str, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.error", level, __file__, 1, text, None, None)


def test_the_first_is_said_then_one_a_window_with_how_many_were_left_out() -> None:
    now = [0.0]
    pace = WarningPace(window_sec=60.0, clock=lambda: now[0])
    said = []
    for second in range(0, 130):
        now[0] = float(second)
        record = _warning(INVALID)
        if pace.filter(record):
            said.append((second, record.getMessage()))
    assert said == [
        (0, INVALID),
        (60, f"{INVALID} (59 more alike since the last one shown)"),
        (120, f"{INVALID} (59 more alike since the last one shown)"),
    ]


def test_errors_and_other_warnings_are_not_held_back() -> None:
    pace = WarningPace(window_sec=60.0, clock=lambda: 0.0)
    assert pace.filter(_warning("Request head too large."))
    assert pace.filter(_warning(INVALID))
    assert not pace.filter(_warning(INVALID))
    assert pace.filter(_warning("Exception in ASGI application", logging.ERROR))
    assert pace.filter(_warning("Exception in ASGI application", logging.ERROR))


def test_texts_that_vary_do_not_grow_its_memory() -> None:
    pace = WarningPace(window_sec=60.0, clock=lambda: 0.0)
    for number in range(10 * MAX_KINDS):
        assert pace.filter(_warning(f"odd request {number}"))
    assert len(pace._kinds) == MAX_KINDS
