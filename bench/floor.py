"""The floor: a trivial ASGI app driven by httpx like the rollout client drives a server.

Both ends on the stack ours ships with (uvicorn + httptools + uvloop; httpx over
core.transport).

The most requests per second this machine's loopback and Python allow with this stack; a
rollout needs about two requests, so half of it bounds rollouts/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

import httpx

from core.transport import AiohttpTransport


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": b'{"ok":true}'})


def serve() -> None:
    import socket

    import uvicorn

    from core.serving.loopback import run

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)  # connections queue from now on, before uvicorn starts accepting
    print(f"READY {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", http="httptools"
    )
    run(uvicorn.Server(config).serve(sockets=[sock]))


async def hammer(url: str, total: int, in_flight: int) -> float:
    limits = httpx.Limits(max_keepalive_connections=in_flight)
    transport = AiohttpTransport(limits=limits)
    async with httpx.AsyncClient(transport=transport, limits=limits) as http:
        left = total

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                (await http.get(url)).raise_for_status()

        await asyncio.gather(*(worker() for _ in range(8)))
        t0 = time.monotonic()
        left = total
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return total / (time.monotonic() - t0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=5000)
    parser.add_argument("-c", type=int, default=32)
    parser.add_argument("--serve", action="store_true")
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.floor", "--serve"],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[1])
        rps = asyncio.run(hammer(f"http://127.0.0.1:{port}/", args.n, args.c))
    finally:
        server.terminate()
        server.wait()
    print(json.dumps({"requests_per_s": rps, "in_flight": args.c}))


if __name__ == "__main__":
    main()
