"""A fleet of rollout servers behind one name (issue 27 item 3): `--server http://NAME:PORT`
whose name resolves to several addresses is that many servers, and the name is looked up again
while the run lives: a server added is used, a server removed gets no new work, and when it
goes away for good its rollouts in flight run again elsewhere. No work item is lost or run
twice.

The name resolves through the system's real resolver: the eval runs in a mount namespace of its
own (`unshare -m`) whose /etc/hosts is the test's file, edited in place mid-run; the servers
listen on addresses of 127.0.0.0/8 on one port. Needs a machine that lets root make the
namespace and mount there (tried first; skipped, saying why, where it cannot).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from core.eval.servers.launcher import free_port
from tests.eval.runs.command import run_eval, start_eval
from tests.eval.runs.files import multiply_rows, read_jsonl, write_jsonl
from tests.eval.runs.servers import ServedDemo, start_served_demo

NAME = "fleet.test"
# Runs the command after it with the hosts file ($0) in place of /etc/hosts, for it alone.
WITH_HOSTS = ("unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"')


def hosts_of_its_own() -> str | None:
    """Why a command cannot be run with a hosts file of its own here (None: it can). Root
    and `unshare` are not enough in a container that may not mount: tried, not assumed."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "a mount namespace of its own needs root and unshare"
    with tempfile.NamedTemporaryFile("w", suffix=".hosts") as probe:
        probe.write(f"127.0.0.1 {NAME}\n")
        probe.flush()
        resolve = f"import socket; socket.getaddrinfo({NAME!r}, 80)"
        tried = subprocess.run(
            [*WITH_HOSTS, probe.name, sys.executable, "-c", resolve],
            check=False,
            capture_output=True,
            text=True,
        )
    if tried.returncode != 0:
        return f"no hosts file of its own here: {tried.stderr.strip() or tried.returncode}"
    return None


CANNOT = hosts_of_its_own()


def hosts(*last_octets: int) -> str:
    lines = ["127.0.0.1 localhost"] + [f"127.0.0.{octet} {NAME}" for octet in last_octets]
    return "\n".join(lines) + "\n"


def edit_hosts(path: Path, text: str) -> None:
    with path.open("r+") as edited:
        edited.truncate(0)
        edited.write(text)


@pytest.mark.skipif(CANNOT is not None, reason=CANNOT or "")
def test_a_name_of_several_addresses_is_a_fleet_followed_while_the_run_lives(
    tmp_path: Path,
) -> None:
    rows = 120
    port, events_port = free_port(), free_port()
    dataset = write_jsonl(
        tmp_path / "rows.jsonl", multiply_rows(rows, metadata={"stub": "slow:1.0"})
    )
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text(hosts(11, 12, 13))
    servers: dict[int, ServedDemo] = {}
    try:
        for octet in (11, 12, 13, 14):
            servers[octet] = start_served_demo(
                *("--host", f"127.0.0.{octet}", "--port", str(port), "--max-concurrent", "2"),
                _OSMOSIS_ROLLOUT_INSTANCE_ID=f"fleet-{octet}",
                OSMOSIS_ROLLOUT_OTLP_ENDPOINT=f"http://127.0.0.1:{events_port}",
            )
        run = start_eval(
            *("--server", f"http://{NAME}:{port}", "--dataset-file", str(dataset)),
            *("--name", "fleet", "--events-port", str(events_port)),
            cwd=tmp_path,
            within=(*WITH_HOSTS, str(hosts_file)),
        )
        folder = tmp_path / ".osmosis" / "evals" / "fleet"
        run.until(lambda: len(read_jsonl(folder / "events.jsonl")) >= 12, "12 finished items")
        # In place, as an edit of /etc/hosts is: the bind mount follows the file, not a name.
        edit_hosts(hosts_file, hosts(11, 12, 13, 14))
        joined = f"server http://127.0.0.14:{port} joined the servers (accepting)"
        run.until(lambda: joined in run.stdout_path.read_text(), "the server to join")
        edit_hosts(hosts_file, hosts(11, 13, 14))
        left = f"server http://127.0.0.12:{port} left the servers"
        run.until(lambda: left in run.stdout_path.read_text(), "the server to leave")
        servers[12].kill()  # then gone for good, its rollouts in flight with it
        _, stderr = run.finish()
    finally:
        for server in servers.values():
            server.stop()
    assert run.returncode == 0, stderr
    # The limit nobody set is the servers' capacity (2 each), as they come and go.
    logs = (folder / "logs.txt").read_text()
    assert "max in flight 6 -> 8 (the servers' capacity)" in logs
    assert "max in flight 8 -> 6 (the servers' capacity)" in logs
    # Nothing lost, nothing twice: each row has exactly one journaled result, all successes.
    events = read_jsonl(folder / "events.jsonl")
    assert Counter(event["row_index"] for event in events) == Counter(range(rows))
    assert [line["status"] for line in read_jsonl(folder / "index.jsonl")] == ["success"] * rows
    # Every server of the name was used, the one added included (by their own events).
    reported = {
        line["server_id"]
        for line in read_jsonl(folder / "transitions.jsonl")
        if line.get("source") == "server"
    }
    assert reported == {"fleet-11", "fleet-12", "fleet-13", "fleet-14"}


def test_a_bad_servers_file_is_bad_input_naming_its_line(tmp_path: Path) -> None:
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(2))
    listing = tmp_path / "servers.txt"
    listing.write_text("# fleet\nhttp://127.0.0.1:8000\n127.0.0.2:8000\n")
    result = run_eval(
        *("--servers-file", str(listing), "--dataset-file", str(dataset)), cwd=tmp_path
    )
    assert result.returncode == 2
    assert f"{listing}:3: '127.0.0.2:8000' has no scheme" in result.stderr
    assert not (tmp_path / ".osmosis").exists(), "bad input writes nothing"
