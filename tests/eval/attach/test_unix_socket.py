"""The control socket file of a live run: private, replaced when stale, never someone else's,
and reachable however long the run folder's path is."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from pathlib import Path

import pytest

from core.eval.attach import unix_socket
from core.eval.attach.client import ControlClient, ViewerRefused
from core.eval.attach.protocol import encode
from core.eval.attach.unix_socket import BoundSocket, ControlSocketError, is_served, socket_path


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def run_folder(tmp_path: Path, name: str = "run") -> Path:
    folder = tmp_path / name
    folder.mkdir(mode=0o700)
    return folder


def leave_stale_socket(folder: Path) -> None:
    """What a run killed with SIGKILL leaves: the socket file, with nobody listening."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(socket_path(folder)))
    sock.close()


def test_the_socket_is_0600_whatever_the_umask_and_goes_at_close(tmp_path: Path) -> None:
    folder = run_folder(tmp_path)
    previous = os.umask(0o000)
    try:
        bound = BoundSocket(folder)
    finally:
        os.umask(previous)
    assert stat.S_ISSOCK(os.lstat(bound.path).st_mode)
    assert mode_of(bound.path) == 0o600
    assert is_served(folder)
    bound.close()
    assert not bound.path.exists()
    assert not is_served(folder)


def test_a_stale_socket_is_replaced(tmp_path: Path) -> None:
    folder = run_folder(tmp_path)
    leave_stale_socket(folder)
    assert not is_served(folder)
    bound = BoundSocket(folder)
    try:
        assert is_served(folder)
    finally:
        bound.close()


def test_a_live_socket_is_never_taken_over(tmp_path: Path) -> None:
    folder = run_folder(tmp_path)
    first = BoundSocket(folder)
    try:
        with pytest.raises(ControlSocketError, match="served by another live process"):
            BoundSocket(folder)
        assert is_served(folder)
    finally:
        first.close()


def test_a_file_that_is_no_socket_is_left_alone(tmp_path: Path) -> None:
    folder = run_folder(tmp_path)
    socket_path(folder).write_text("mine")
    with pytest.raises(ControlSocketError, match="is not a socket"):
        BoundSocket(folder)
    assert socket_path(folder).read_text() == "mine"


def test_closing_removes_only_its_own_socket_file(tmp_path: Path) -> None:
    folder = run_folder(tmp_path)
    bound = BoundSocket(folder)
    bound.socket.close()  # as if it had died: another run may bind the name meanwhile
    other = BoundSocket(folder)
    try:
        bound.close()
        assert is_served(folder), "the other run's socket is still there"
    finally:
        other.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_a_run_folder_too_deep_for_a_socket_address_is_served_through_its_descriptor(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    folder = run_folder(deep)
    assert len(str(socket_path(folder))) > unix_socket.MAX_ADDRESS_BYTES
    bound = BoundSocket(folder)
    try:
        assert mode_of(bound.path) == 0o600
        connected = unix_socket.connect(folder)
        connected.close()
    finally:
        bound.close()
    assert not bound.path.exists()


def test_without_proc_a_too_deep_folder_is_refused_plainly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unix_socket, "_PROC_FDS", tmp_path / "no-proc")
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    with pytest.raises(ControlSocketError, match="too long for a Unix socket address"):
        BoundSocket(run_folder(deep))
    assert not is_served(deep / "run")


async def test_what_a_refusing_run_says_reaches_the_viewer_without_its_control_characters(
    tmp_path: Path,
) -> None:
    # A run's refusal is shown on the viewer's terminal: its text can never steer it.
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(encode({"type": "refused", "version": 1, "error": "no\x1b[2J\nway"}))
        await writer.drain()
        writer.close()

    bound = BoundSocket(tmp_path)
    server = await asyncio.start_unix_server(refuse, sock=bound.socket)
    try:
        with pytest.raises(ViewerRefused) as refused:
            await ControlClient.connect(tmp_path)
    finally:
        server.close()
        await server.wait_closed()
        bound.close()
    assert str(refused.value) == "the run refused: no\ufffd[2J\ufffdway"
