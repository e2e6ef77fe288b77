"""`logs.txt` (EVAL.md §6): timestamped, redacted, private lines."""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime
from pathlib import Path

from core.eval.redact import Redactor
from core.eval.results.logs import RunLog
from tests.eval_results.helpers import file_mode

SECRET = "sk-live-0123456789abcdef"
BEARER = "server-bearer-token-xyz"


def test_run_log_lines_are_timestamped_redacted_and_private(tmp_path: Path) -> None:
    path = tmp_path / "logs.txt"
    with RunLog(path, Redactor([SECRET, BEARER])) as log:
        log.write(f"starting with key {SECRET}")
        log.write(f"Authorization: Bearer {BEARER}\nsecond line\n", source="rollout-server")
    assert file_mode(path) == 0o600
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    for line in lines:
        stamp, _, _rest = line.partition(" ")
        assert stamp.endswith("Z")
        datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert lines[0].endswith(" starting with key ***")
    assert lines[1].endswith(" [rollout-server] Authorization: Bearer ***")
    assert lines[2].endswith(" [rollout-server] second line")
    text = path.read_text()
    assert SECRET not in text and BEARER not in text


def test_run_log_as_a_logging_handler_redacts_messages_and_tracebacks(tmp_path: Path) -> None:
    path = tmp_path / "logs.txt"
    log = RunLog(path, Redactor([SECRET]))
    logger = logging.getLogger("tests.eval_results.runlog")
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
    assert "INFO tests.eval_results.runlog: request body" in text
    assert "ERROR tests.eval_results.runlog: admission failed" in text
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
