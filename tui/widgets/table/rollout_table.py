"""The rollout table: one line per rollout, drawn with Textual's Line API.

Built for 10,000 rows and hundreds of changes a second (DESIGN.md §2): each row's line is
rendered once into a cached `Strip` and kept until that rollout changes; a repaint touches
only the visible lines whose rollout changed. The cursor is a rollout id, not a line number,
so it follows its rollout through sorts, filters and inserts. Rows are tinted by their state
(row_states.py); the sorted column's header carries the sort's marker, and a click on a
header asks for that column's sort (`HeaderSelected`). The lines themselves are drawn by
table_strips.py, from the columns of table_columns.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from core.board import RolloutBoard
from core.eval.compare.baseline import Baseline
from core.rollout_record import RolloutRecord
from tui.widgets.table.columns import Layout, column_at, layout_columns
from tui.widgets.table.row_states import TINTS, TINTS_CSS
from tui.widgets.table.sorting import SORT_COLUMNS
from tui.widgets.table.strips import header_strip, overlay, row_strip
from tui.widgets.table.view import TableView
from tui.widgets.table.whole_cell_scrollbar import WholeCellScrollBarRender

Clock = Callable[[], float]


#: A reorder that takes this long (a sort of some 100,000 rows)...
COSTLY_REORDER_SEC = 0.02
#: ...is made again by a change or the clock no sooner than this many times its cost after
#: the last: re-sorting 100,000 rows by a column that moves every second took two thirds of a
#: core (bench/dashboard.py). The user's own sort, filter or jump is never put off.
REORDER_GAP = 10
#: Rendered rows kept, far more than any terminal shows. A row's strip is kept until the row
#: changes, and a finished row never changes again: paging through a big finished run (or a
#: replay of one) kept every row it passed, ~3.6 KB each at 160 columns. Past this the row
#: rendered longest ago goes first.
STRIPS_KEPT = 1024


class RolloutTable(ScrollView, can_focus=True):
    """Every rollout on the board that passes the filters, in the chosen order.

    Line 0 is the column header; it stays put while the rows scroll under it.
    """

    COMPONENT_CLASSES = {
        "rollout-table--header",
        "rollout-table--sorted",
        "rollout-table--cursor",
        "rollout-table--marked",
        "rollout-table--dim",
        *TINTS,
    }

    DEFAULT_CSS = (
        """
    RolloutTable {
        height: 1fr;
        overflow-x: hidden;
        scrollbar-size-vertical: 1;  /* one column more for the cells at 80 columns */
        /* The scrollbar's room is kept even while every row fits: the columns do not
           shift (and every cached line go stale) when the first row too many arrives. */
        scrollbar-gutter: stable;
        background: $surface;
    }
    RolloutTable > .rollout-table--header {
        background: $panel;
        color: $text-muted;
        text-style: bold;
    }
    RolloutTable > .rollout-table--sorted {
        background: $panel;
        color: $text-accent;
        text-style: bold;
    }
    RolloutTable > .rollout-table--cursor {
        background: $primary 25%;
    }
    RolloutTable:focus > .rollout-table--cursor {
        background: $primary 55%;
    }
    RolloutTable > .rollout-table--marked {
        background: $warning 20%;
    }
    RolloutTable > .rollout-table--dim {
        color: $text-muted;
    }
    """
        + TINTS_CSS
    )

    BINDINGS = [
        Binding(
            "up,k", "cursor(-1)", "Up", tooltip="The rollout above", show=False, id="cursor.up"
        ),
        Binding(
            "down,j", "cursor(1)", "Down", tooltip="The rollout below", show=False, id="cursor.down"
        ),
        Binding(
            "pageup",
            "cursor_page(-1)",
            "Page up",
            tooltip="One screen of rollouts up",
            show=False,
            id="cursor.page-up",
        ),
        Binding(
            "pagedown",
            "cursor_page(1)",
            "Page down",
            tooltip="One screen of rollouts down",
            show=False,
            id="cursor.page-down",
        ),
        Binding(
            "home,g",
            "cursor_edge(0)",
            "First",
            tooltip="The first rollout shown",
            show=False,
            id="cursor.first",
        ),
        Binding(
            "end,G",
            "cursor_edge(1)",
            "Last",
            tooltip="The last rollout shown",
            show=False,
            id="cursor.last",
        ),
    ]

    class CursorMoved(Message):
        """The cursor is on another rollout (or on none)."""

        def __init__(self, rollout_id: str | None) -> None:
            super().__init__()
            self.rollout_id = rollout_id

    class HeaderSelected(Message):
        """A column's header was clicked (as Textual's `DataTable.HeaderSelected`)."""

        def __init__(self, column: str) -> None:
            super().__init__()
            #: The column's key (`table_columns.COLUMNS`).
            self.column = column

    def __init__(
        self,
        board: RolloutBoard,
        *,
        clock: Clock = time.monotonic,
        baseline: Baseline | None = None,
        watch_rows: bool = False,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.board = board
        self.clock = clock
        #: The run compared with (`--baseline`): its column, and the regressed rows' tint.
        self.baseline = baseline
        #: A watch's rollouts: their run and server where a run's row and attempt go.
        self.watch_rows = watch_rows
        self.order: list[str] = []
        self._position: dict[str, int] = {}
        # What the last reorder took (CPU seconds) and when (`time.perf_counter`), and
        # whether one was put off since (`rebuild(deferrable=True)`).
        self._reorder_cost = 0.0
        self._reordered_at = 0.0
        self._reorder_due = False
        self._strips: dict[str, Strip] = {}
        self._header: Strip | None = None
        self._layout: Layout = layout_columns(0)
        self._layout_width = -1
        self.cursor_id: str | None = None
        self.marks: set[str] = set()
        #: The filters and sort the rows follow; the app sets it (`show`).
        self.view = TableView()
        #: Follow mode (`tail -f`): the cursor goes to each new rollout shown.
        self.follow = False
        self._styles: dict[str, Style] = {}
        self._cached_styles: tuple[Style, ...] = ()
        self._restyled = True

    def on_mount(self) -> None:
        # This table's scrollbar only; Textual documents the class variable as settable on
        # an instance for that.
        self.vertical_scrollbar.renderer = WholeCellScrollBarRender  # type: ignore[misc]

    # -- data ------------------------------------------------------------------------------

    def show(self, view: TableView) -> None:
        """Show the rows `view` selects, in its order."""
        if view.sort != self.view.sort:
            self._header = None  # the marker moves
        self.view = view
        self.rebuild()

    def use_board(self, board: RolloutBoard) -> None:
        """Show another board's rollouts instead (a replay that went back): every row drawn
        anew, the cursor on its rollout when the new board has it."""
        self.board = board
        self._strips.clear()
        self.marks.intersection_update(board.records)
        self.rebuild()

    def rebuild(self, changed: set[str] | None = None, *, deferrable: bool = False) -> None:
        """Recompute which rollouts show and in what order; keeps the cursor on its rollout.

        With `changed` given and the order the same as before, only those rows repaint.
        `deferrable` (a change or the clock, not the user, moved the order): when reordering
        is costly (`COSTLY_REORDER_SEC`) and the last reorder is recent (less than
        `REORDER_GAP` times its cost ago), the changed rows repaint in place and the reorder
        waits for the next `tick`.
        """
        now = time.perf_counter()
        if (
            deferrable
            and changed is not None
            and self._reorder_cost >= COSTLY_REORDER_SEC
            and now - self._reordered_at < REORDER_GAP * self._reorder_cost
        ):
            self._reorder_due = True
            self._refresh_rows(changed)
            return
        # Its cost in this thread's CPU time: a busy machine that keeps the process waiting
        # does not make a small table's reorder look costly.
        cpu = time.thread_time()
        order = [record.rollout_id for record in self.view.select(self.board, self.clock())]
        self._reorder_cost = time.thread_time() - cpu
        self._reordered_at = time.perf_counter()
        self._reorder_due = False
        if changed is not None and order == self.order:
            self._refresh_rows(changed)
            return
        self.order = order
        self._position = {rollout_id: index for index, rollout_id in enumerate(order)}
        self._resize_virtual()
        self._follow_cursor()
        self.refresh()

    def _resize_virtual(self) -> None:
        # One line more than there are rows: the header.
        self.virtual_size = Size(max(self._layout_width, 0), len(self.order) + 1)

    def apply_changes(self, changed: Iterable[str], added: Iterable[str]) -> None:
        """Take a change batch from the board: patch in place when the order cannot change."""
        changed = set(changed)
        added = [rollout_id for rollout_id in added if rollout_id not in self._position]
        if not changed and not added:
            return
        for rollout_id in changed:
            self._strips.pop(rollout_id, None)
        # A new rollout goes to the end only in submission order; any other order places it.
        if self.view.order_depends_on_changes or (added and self.view.sort.column is not None):
            # A new row has no place until the order is made again: never put off then.
            self.rebuild(changed | set(added), deferrable=not added)
        else:
            for rollout_id in added:
                self._position[rollout_id] = len(self.order)
                self.order.append(rollout_id)
            if added:
                self._resize_virtual()
                if self.cursor_id is None:
                    self._follow_cursor()
            self._refresh_rows(changed | set(added))
        if self.follow:
            shown = [rollout_id for rollout_id in added if rollout_id in self._position]
            if shown:
                self.move_cursor_to(shown[-1])

    def follow_newest(self) -> None:
        """Follow mode begins: the cursor goes to the newest rollout shown."""
        shown = self._position
        newest = next((rid for rid in reversed(self.board.records) if rid in shown), None)
        if newest is not None:
            self.move_cursor_to(newest)

    def tick(self) -> None:
        """Once a second: times and stuck flags of visible in-flight rollouts move on."""
        moving = {
            rid for rid in self._visible_ids() if (r := self.board.records.get(rid)) and r.in_flight
        }
        for rollout_id in moving:
            self._strips.pop(rollout_id, None)
        if self.view.order_depends_on_time or self._reorder_due:
            self.rebuild(moving, deferrable=True)
        else:
            self._refresh_rows(moving)

    @property
    def _rows_height(self) -> int:
        """Lines for rows: the widget's height less the header."""
        return max(self.size.height - 1, 0)

    def _visible_ids(self) -> list[str]:
        top = int(self.scroll_offset.y)
        return self.order[top : top + self._rows_height]

    def _refresh_rows(self, rollout_ids: Iterable[str]) -> None:
        """Repaint the visible lines of these rollouts, and nothing else."""
        top, rows = int(self.scroll_offset.y), self._rows_height
        width = self.size.width
        for rollout_id in rollout_ids:
            index = self._position.get(rollout_id)
            if index is not None and top <= index < top + rows:
                self.refresh(Region(0, index - top + 1, width, 1))

    # -- cursor ----------------------------------------------------------------------------

    @property
    def cursor_index(self) -> int | None:
        return None if self.cursor_id is None else self._position.get(self.cursor_id)

    def _follow_cursor(self) -> None:
        if not self.order:
            self._set_cursor(None)
            return
        if self.cursor_id is None or self.cursor_id not in self._position:
            self._set_cursor(self.order[0])
        self._scroll_to_cursor()

    def _set_cursor(self, rollout_id: str | None) -> None:
        previous = self.cursor_id
        self.cursor_id = rollout_id
        if previous != rollout_id:
            self._refresh_rows(rid for rid in (previous, rollout_id) if rid is not None)
            self.post_message(self.CursorMoved(rollout_id))

    def move_cursor_to(self, rollout_id: str) -> None:
        if rollout_id in self._position:
            self._set_cursor(rollout_id)
            self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        index = self.cursor_index
        if index is None or not self.size.height:
            return  # not laid out yet: the first resize brings the cursor into view
        top, rows = int(self.scroll_offset.y), max(self._rows_height, 1)
        # force: right after a rebuild the scrollbar may not be laid out yet (a filter that
        # left one row, then cleared), and without it an `overflow: auto` view will not move.
        if index < top:
            self.scroll_to(y=index, animate=False, force=True)
        elif index >= top + rows:
            self.scroll_to(y=index - rows + 1, animate=False, force=True)

    def on_resize(self) -> None:
        # Fewer lines (the event log or the filter bar opened, the terminal shrank): the
        # cursor's row must stay in view.
        self._scroll_to_cursor()

    def action_cursor(self, delta: int) -> None:
        if not self.order:
            return
        index = self.cursor_index or 0
        target = min(max(index + delta, 0), len(self.order) - 1)
        self._set_cursor(self.order[target])
        self._scroll_to_cursor()

    def action_cursor_page(self, direction: int) -> None:
        self.action_cursor(direction * max(self._rows_height - 1, 1))

    def action_cursor_edge(self, end: int) -> None:
        if self.order:
            self._set_cursor(self.order[-1 if end else 0])
            self._scroll_to_cursor()

    def rollout_at(self, y: int) -> str | None:
        """The rollout drawn on line `y` of the widget (line 0 is the header)."""
        index = int(self.scroll_offset.y) + y - 1
        return self.order[index] if y >= 1 and 0 <= index < len(self.order) else None

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            column = column_at(self._layout, event.x)
            if column in SORT_COLUMNS:
                self.post_message(self.HeaderSelected(column))
            return
        rollout_id = self.rollout_at(event.y)
        if rollout_id is not None:
            self._set_cursor(rollout_id)

    def toggle_mark(self) -> None:
        rollout_id = self.cursor_id
        if rollout_id is None:
            return
        self.marks.symmetric_difference_update({rollout_id})
        self._strips.pop(rollout_id, None)
        self._refresh_rows({rollout_id})
        self.action_cursor(1)

    def clear_marks(self, rollout_ids: Iterable[str] | None = None) -> None:
        cleared = set(self.marks if rollout_ids is None else rollout_ids) & self.marks
        self.marks -= cleared
        for rollout_id in cleared:
            self._strips.pop(rollout_id, None)
        self._refresh_rows(cleared)

    # -- rendering -------------------------------------------------------------------------

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = Style.parse(name) if name else Style()
        return style

    def _background(self, component: str) -> Style:
        """Only the (blended) background of a component class: the cells keep their colours."""
        return Style(bgcolor=self.get_component_rich_style(component).bgcolor)

    def _foreground(self, component: str) -> Style:
        """Only the colour of a component class, blended as the theme means it (`$text-muted`
        is a shade of the background: a partial style would leave it unblended, white)."""
        return Style(color=self.get_component_rich_style(component).color)

    def _tint(self, component: str) -> Style:
        """A row tint: its component's background, and its boldness."""
        style = self.get_component_rich_style(component)
        return Style(bgcolor=style.bgcolor, bold=style.bold)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._restyled = True

    def _check_cache(self) -> None:
        """Drop the cached lines when what they were drawn with has changed.

        The columns follow the width (the terminal, the details pane). The styles follow the
        theme; a focus change restyles the widget too, but only the cursor's colour moves,
        and that is applied on top of the cache, so it costs no redraw of every line.
        """
        width = self.scrollable_content_region.width
        if width != self._layout_width:
            self._layout_width = width
            self._layout = layout_columns(
                width, baseline=self.baseline is not None, watch=self.watch_rows
            )
            self._strips.clear()
            self._header = None
            self._resize_virtual()
        if self._restyled:
            self._restyled = False
            styles = (
                self.rich_style,
                self.get_component_rich_style("rollout-table--header"),
                self._foreground("rollout-table--dim"),
                self.get_component_rich_style("rollout-table--marked"),
                self.get_component_rich_style("rollout-table--sorted"),
                *(self._tint(tint) for tint in sorted(TINTS)),
            )
            if styles != self._cached_styles:
                self._cached_styles = styles
                self._strips.clear()
                self._header = None

    def render_line(self, y: int) -> Strip:
        self._check_cache()
        width = self.size.width
        base = self.rich_style
        if y == 0:
            if self._header is None:
                self._header = self._render_header(base, width)
            return self._header
        rollout_id = self.rollout_at(y)
        if rollout_id is None:
            return Strip.blank(width, base)
        strips = self._strips
        strip = strips.get(rollout_id)
        if strip is None:
            record = self.board.records.get(rollout_id)
            if record is None:
                return Strip.blank(width, base)
            if len(strips) >= STRIPS_KEPT:
                del strips[next(iter(strips))]
            strip = strips[rollout_id] = self._render_row(record, base).crop_extend(0, width, base)
        if rollout_id == self.cursor_id:
            strip = overlay(strip, self._background("rollout-table--cursor"))
        return strip

    def _render_header(self, base: Style, width: int) -> Strip:
        return header_strip(
            self._layout,
            self.view.sort,
            style=base + self.get_component_rich_style("rollout-table--header"),
            sorted_style=base + self.get_component_rich_style("rollout-table--sorted"),
            width=width,
        )

    def _render_row(self, record: RolloutRecord, base: Style) -> Strip:
        return row_strip(
            record,
            self.board,
            self.clock(),
            self._layout,
            marked=record.rollout_id in self.marks,
            baseline=self.baseline,
            base=base,
            style=self._style,
            dim=self._foreground("rollout-table--dim"),
            tint=self._tint,
            marked_background=self._background("rollout-table--marked"),
        )
