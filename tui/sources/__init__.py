"""What the dashboard watches: a live eval run (`live`) or a recorded one (`replay`), both
behind the `DashboardSource` interface (`base`).

Textual-free on purpose, like `core/`: they hold the run, the app only draws it
(tests/test_layering.py checks).
"""
