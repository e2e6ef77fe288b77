"""Where a run's rollout servers are (core/eval/servers/directory.py): a servers file read and
read again, URLs kept as given where a name stands for one server, and its bad lines named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.eval.errors import InputError
from core.eval.servers.directory import ServerDirectory, read_servers_file, with_host


def test_a_servers_file_lists_urls_one_a_line_skipping_blanks_and_comments(
    tmp_path: Path,
) -> None:
    path = tmp_path / "servers.txt"
    path.write_text(
        "# the fleet\n\nhttp://10.0.0.1:8000/\n  http://10.0.0.2:8000  \nhttp://10.0.0.1:8000\n"
    )
    # Trailing slashes go as they do from --server; a URL listed twice is one.
    assert read_servers_file(path) == ("http://10.0.0.1:8000", "http://10.0.0.2:8000")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://a:1\n10.0.0.3:8000\n", ["servers.txt:2: '10.0.0.3:8000' has no scheme"]),
        ("ftp://a\nhttp://b:99999\n", ["servers.txt:1:", "servers.txt:2:", "bad port"]),
        ("# nothing here\n\n", ["servers.txt: --servers-file: lists no server URL"]),
    ],
)
def test_a_bad_servers_file_names_its_lines(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = tmp_path / "servers.txt"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        read_servers_file(path)
    message = str(caught.value).replace(str(tmp_path) + os.sep, "")
    for part in expected:
        assert part in message


def test_a_missing_servers_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"missing\.txt: --servers-file: cannot be read"):
        read_servers_file(tmp_path / "missing.txt")


def test_a_host_is_replaced_keeping_scheme_port_and_path() -> None:
    assert with_host("http://fleet:8000/api", "10.0.0.7") == "http://10.0.0.7:8000/api"
    assert with_host("http://fleet/api", "fd00::7") == "http://[fd00::7]/api"


async def test_addresses_https_and_names_of_one_address_stay_as_given() -> None:
    given = (
        "http://127.0.0.1:8000",
        "http://[::1]:8001",
        "https://localhost:8002",  # TLS checks the name: never an address in its place
        "http://localhost:8003",  # one IPv4 address: the name is the server
    )
    assert await ServerDirectory(given).endpoints() == list(given)


async def test_the_servers_file_is_read_again_when_it_changes_and_kept_when_it_breaks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "servers.txt"
    path.write_text("http://127.0.0.1:8000\n")
    directory = ServerDirectory(("http://127.0.0.1:9000",), path)
    assert await directory.endpoints() == ["http://127.0.0.1:9000", "http://127.0.0.1:8000"]
    path.write_text("http://127.0.0.1:8000\nhttp://127.0.0.1:8001\n")
    assert await directory.endpoints() == [
        "http://127.0.0.1:9000",
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8001",
    ]
    # Half written, then gone for a moment (an editor's save): the last good list stays.
    listed = await directory.endpoints()
    path.write_text("http://127.0.0.1:8000\nhtt")
    os.utime(path, ns=(1, 1))
    assert await directory.endpoints() == listed
    path.unlink()
    assert await directory.endpoints() == listed
    path.write_text("http://127.0.0.1:8002\n")
    assert await directory.endpoints() == ["http://127.0.0.1:9000", "http://127.0.0.1:8002"]
