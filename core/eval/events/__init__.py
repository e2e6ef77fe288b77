"""The events room: the ownership events a run's rollout servers publish (PROTOCOL.md §8.1).

Its door is `EventReceiver` (`receiver`): a loopback OTLP/HTTP logs endpoint that the servers
export to, protobuf or JSON, bounded in what one request may make it hold. `ownership` turns
one OTLP log record into one `OwnershipEvent` (server, rollout, status, sequence, the server's
own time), which the board merges as the exact source of a phase's time.
"""
