"""The rows × attempts grid (issue 25): a line per dataset row, a glyph per attempt.

`rows` is its model, built from the board and kept up to date from its changes (no
Textual); `grid_view` the Line-API widget that draws it, a cached strip per row.
"""
