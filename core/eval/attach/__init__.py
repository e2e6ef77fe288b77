"""The attach room: a live run's control socket, and the dashboards attached to it.

A running eval serves its board over `<run>/control.sock` (`unix_socket`: bound owner-only,
found stale, connected to) with `ControlEndpoint` (`endpoint`); `osmosis-tui attach` is the
other end (`ControlClient`, `client`), keeping a board of its own in step (`BoardMirror`,
`mirror`). What the two say is `protocol`: newline-delimited JSON frames with a version, the
record states one way and the dashboard's actions the other. `run_list` finds the runs under a
results root, for `osmosis-tui runs` and for `attach` to pick from.
"""
