"""`logs.txt` (EVAL.md §8): the official line format, redacted, private."""

from __future__ import annotations

import json
import logging
import os
import re
from datetime import datetime
from pathlib import Path

from core.eval.redact import Redactor
from core.eval.results.logs import RunLog, log_line, read_log
from tests.eval.results.helpers import file_mode

# `<UTC ISO µs Z> <LEVEL> [<step>] <message>[ <details>]`
OFFICIAL_LINE = re.compile(
    r"(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) (?P<level>[A-Z]+) "
    r"\[(?P<step>[^\]]+)\] (?P<rest>.*)"
)

SECRET = "sk-live-0123456789abcdef"
BEARER = "server-bearer-token-xyz"


def test_run_log_lines_are_timestamped_redacted_and_private(tmp_path: Path) -> None:
    path = tmp_path / "logs.txt"
    with RunLog(path, Redactor([SECRET, BEARER])) as log:
        log.write(f"starting with key {SECRET}")
        log.write(f"Authorization: Bearer {BEARER}\nsecond line\n", step="rollout-server")
        log.write(
            "work item finished",
            step="result",
            details={"status": "failed", "reward": None, "note": SECRET},
        )
        log.write("", step="rollout-server")
    assert file_mode(path) == 0o600
    lines = path.read_text().split("\n")[:-1]
    assert len(lines) == 5
    matches = [OFFICIAL_LINE.fullmatch(line) for line in lines]
    assert all(matches), lines
    for match in matches:
        assert match is not None
        datetime.fromisoformat(match["stamp"].replace("Z", "+00:00"))
    assert [(m["level"], m["step"], m["rest"]) for m in matches if m is not None] == [
        ("INFO", "run", "starting with key ***"),
        ("INFO", "rollout-server", "Authorization: Bearer ***"),
        ("INFO", "rollout-server", "second line"),
        # Canonical JSON, nulls kept, as official.
        ("INFO", "result", 'work item finished {"note":"***","reward":null,"status":"failed"}'),
        ("INFO", "rollout-server", ""),  # an empty line keeps its trailing space
    ]
    text = path.read_text()
    assert SECRET not in text and BEARER not in text


def test_log_line_levels_and_a_fixed_stamp() -> None:
    stamp = "2026-12-01T08:46:54.163598Z"
    assert log_line("r1: 5 of 5 work items pending", stamp=stamp) == (
        f"{stamp} INFO [run] r1: 5 of 5 work items pending\n"
    )
    assert (
        log_line(
            "discarded a partial trailing journal record",
            step="resume",
            level="warning",
            details={"bytes": 14},
            stamp=stamp,
        )
        == f'{stamp} WARNING [resume] discarded a partial trailing journal record {{"bytes":14}}\n'
    )


def test_run_log_as_a_logging_handler_redacts_messages_and_tracebacks(tmp_path: Path) -> None:
    path = tmp_path / "logs.txt"
    log = RunLog(path, Redactor([SECRET]))
    logger = logging.getLogger("tests.eval.results.runlog")
    handler = log.handler(logging.INFO)
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        logger.debug("not at this level")
        logger.info("request body %s", json.dumps({"llm_api_key": SECRET}))
        try:
            raise RuntimeError(f"upstream said: Authorization: Bearer {SECRET}")
        except RuntimeError:
            logger.exception("admission failed")
    finally:
        logger.removeHandler(handler)
        log.close()
    text = path.read_text()
    assert SECRET not in text
    assert "not at this level" not in text
    assert " INFO [tests.eval.results.runlog] request body" in text
    assert " ERROR [tests.eval.results.runlog] admission failed" in text
    assert "Traceback" in text
    # Writes after close (a handler left attached) are dropped, not raised.
    log.write("late")
    assert "late" not in path.read_text()


def test_a_device_given_as_a_log_path_keeps_its_mode(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o644)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so opening for writing does not block
    try:
        RunLog(fifo).close()
    finally:
        os.close(reader)
    assert file_mode(fifo) == 0o644


def test_lines_read_back_with_their_time_step_and_details(tmp_path: Path) -> None:
    path = tmp_path / "logs.txt"
    with RunLog(path) as log:
        log.write("r1: 2 of 2 work items pending")
        log.write(
            "dispatching rollout",
            step="dispatch",
            details={"rollout_id": "ab" * 16, "row_index": 0, "run_index": 1},
        )
        log.write("first\nsecond", step="rollout-server")
    with path.open("a") as stream:  # an official line, and what is no line of the format
        stream.write(
            '2026-12-01T08:47:01.716486Z INFO [result] work item finished {"reward":null,'
            '"rollout_id":"5c0d","row_index":2,"run_index":0,"status":"failed"}\n'
            "Traceback (most recent call last):\n"
            "2026-13-01T00:00:00.000000Z INFO [run] not a time\n"
            "2026-12-01T08:47:02.000000Z INFO [result] work item finished {torn"
        )
    lines = list(read_log(path))
    assert [line.step for line in lines] == [
        "run", "dispatch", "rollout-server", "rollout-server", "result", "result",
    ]  # fmt: skip
    assert all(line.at.tzinfo is not None for line in lines)
    assert lines[1].details("dispatching rollout") == {
        "rollout_id": "ab" * 16,
        "row_index": 0,
        "run_index": 1,
    }
    assert lines[1].details("work item finished") is None  # it says something else
    assert lines[0].details("r1: 2 of 2 work items pending") is None  # no details
    assert lines[4].details("work item finished") == {
        "reward": None, "rollout_id": "5c0d", "row_index": 2, "run_index": 0, "status": "failed",
    }  # fmt: skip
    assert lines[4].at == datetime.fromisoformat("2026-12-01T08:47:01.716486+00:00")
    assert lines[5].details("work item finished") is None  # details that do not parse
