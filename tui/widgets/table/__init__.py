"""The rollout table: one line per rollout on the Line API, repainted only where rows changed.

`RolloutTable` (`rollout_table`) is the widget; `view` says which rollouts it shows and in what
order (the dashboard's filters and sort); `columns` which columns fit a width and what each
cell says; `strips` draws the header and a row as strips; `sorting` holds each column's sort
key and the keys that pick them; `row_states` a row's tint; `whole_cell_scrollbar` a scrollbar
whose thumb starts and ends on whole cells.
"""
