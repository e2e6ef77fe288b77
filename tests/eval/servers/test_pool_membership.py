"""The pool follows its directory while the run lives (core/eval/servers/pool.py): servers that
join are probed and used, servers that leave take no new work and are dropped once nothing is
in flight there, and two URLs of one server (the same /health instance_id) are one server.
Real rollout servers on loopback, a real servers file."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

from core.eval.servers.directory import ServerDirectory
from core.eval.servers.pool import ServerPool
from tests.reliability.in_process import demo_app, rollout_server


async def test_servers_join_and_leave_with_the_servers_file(tmp_path: Path) -> None:
    async with AsyncExitStack() as stack:
        a, b = [
            await stack.enter_async_context(rollout_server(demo_app(max_concurrent=2)))
            for _ in range(2)
        ]
        listing = tmp_path / "servers.txt"
        listing.write_text(f"{a}\n")
        directory = ServerDirectory((), listing)
        told: list[str] = []
        pool = ServerPool.connect(
            await directory.endpoints(),
            api_key=None,
            on_event=lambda slot, event: told.append(f"{slot.url} {event}"),
            directory=directory,
        )
        stack.push_async_callback(pool.aclose)
        changes: list[int | None] = []
        pool.on_servers_changed = lambda: changes.append(pool.advertised_capacity())
        await pool.probe_all()
        assert pool.advertised_capacity() == 2

        listing.write_text(f"{a}\n{b}\n")
        await pool.refresh()
        assert [slot.url for slot in pool.slots] == [a, b]
        assert told == [f"{b} joined the servers (accepting)"]
        assert changes == [4]
        # Both are used, each in turn while they have the same room.
        taken = [await pool.acquire() for _ in range(3)]
        assert [slot.url for slot in taken] == [a, b, a]

        listing.write_text(f"{b}\n")
        await pool.refresh()
        assert told[-1] == f"{a} left the servers: no new work (2 in flight there)"
        assert changes == [4, 2]
        left = pool.slots[0]
        assert left.url == a and left.free == 0, "a stays while its rollouts finish"
        assert pool.advertised_capacity() == 2
        assert (await pool.acquire()).url == b
        pool.release(taken[0])
        assert [slot.url for slot in pool.slots] == [a, b]
        pool.release(taken[2])
        assert [slot.url for slot in pool.slots] == [b], "dropped once nothing is in flight"

        listing.write_text(f"{a}\n{b}\n")
        await pool.refresh()
        assert [slot.url for slot in pool.slots] == [b, a], "a comes back as a new server"


async def test_two_urls_of_one_server_are_one_server(tmp_path: Path) -> None:
    async with rollout_server(demo_app()) as url:
        other_name = url.replace("127.0.0.1", "localhost")
        listing = tmp_path / "servers.txt"
        listing.write_text(f"{url}\n{other_name}\n")
        directory = ServerDirectory((), listing)
        pool = ServerPool.connect(await directory.endpoints(), api_key=None, directory=directory)
        try:
            await pool.probe_all()
            assert [slot.url for slot in pool.slots] == [url]
            await pool.refresh()  # the alias is remembered, not probed and added again
            assert [slot.url for slot in pool.slots] == [url]
        finally:
            await pool.aclose()
