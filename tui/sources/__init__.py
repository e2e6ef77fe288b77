"""What the dashboard watches: a live eval run (`live`), a recorded one (`replay`), a live
run that another process runs (`attached`), or the rollouts of servers that send their events
to a watch (`watch`), all behind the `DashboardSource` interface (`base`).

Textual-free on purpose, like `core/`: they hold the run, the app only draws it
(tests/test_layering.py checks).
"""
