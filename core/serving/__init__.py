"""Serving: one hardened uvicorn-on-loopback set-up for every server we run (DESIGN.md §1).

The rollout server and the stub model (`server_stub`) and the eval's own listeners (the model
gateway, the event receiver) all start through `loopback`: a socket bound before uvicorn
starts, uvicorn in the caller's event loop leaving the signal handlers to their owner, and
every connection held to `http_limits` (head size, header count, head timeout, connections
open). `asgi` is the bare ASGI the eval's listeners answer with. This part imports nothing of
ours, so both the server and the eval engine may use it.
"""
