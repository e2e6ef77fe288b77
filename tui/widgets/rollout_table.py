"""The rollout table: one line per rollout, drawn with Textual's Line API.

Built for 10,000 rows and hundreds of changes a second (DESIGN.md §2): each row's line is
rendered once into a cached `Strip` and kept until that rollout changes; a repaint touches
only the visible lines whose rollout changed. The cursor is a rollout id, not a line number,
so it follows its rollout through sorts, filters and inserts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from core.board import RolloutBoard, RolloutRecord
from tui.widgets.format import STATUS_STYLES, duration, reward
from tui.widgets.phase_track import CONNECTOR, phase_cells

Clock = Callable[[], float]


@dataclass(frozen=True)
class Column:
    title: str
    width: int
    align: str = "left"


COLUMNS = (
    Column("", 2),
    Column("row", 6, "right"),
    Column("try", 4, "right"),
    Column("rollout", 11),
    Column("status", 13),
    Column("phases", 8),
    Column("in phase", 9, "right"),
    Column("total", 8, "right"),
    Column("reward", 7, "right"),
    Column("error", 17),
    Column("flags", 24),
)
TABLE_WIDTH = sum(column.width for column in COLUMNS)

SORTS: dict[str, str] = {
    "submitted": "order submitted",
    "row": "row, then attempt",
    "status": "status",
    "phase_time": "longest in phase first",
    "reward": "reward, lowest first",
}
_STATUS_RANK = {
    "not_admitted": 0,
    "failure": 1,
    "cancelled": 2,
    "grading": 3,
    "running": 4,
    "queued": 5,
    "success": 6,
}


def _cell(text: str, width: int, align: str = "left") -> str:
    if len(text) > width - 1:
        text = text[: max(width - 2, 0)] + "…"
    return (text.rjust(width - 1) if align == "right" else text.ljust(width - 1)) + " "


def _clean(text: str) -> str:
    # Untrusted text goes straight into segments (never markup); control characters are masked.
    return "".join(ch if ch.isprintable() else "\ufffd" for ch in text)


class RolloutTable(ScrollView, can_focus=True):
    """Every rollout on the board that passes the filters, in the chosen order."""

    COMPONENT_CLASSES = {
        "rollout-table--cursor",
        "rollout-table--marked",
        "rollout-table--dim",
    }

    DEFAULT_CSS = """
    RolloutTable {
        height: 1fr;
        overflow-x: hidden;
        background: $surface;
    }
    RolloutTable > .rollout-table--cursor {
        background: $accent 40%;
    }
    RolloutTable:focus > .rollout-table--cursor {
        background: $accent 70%;
    }
    RolloutTable > .rollout-table--marked {
        background: $warning 20%;
    }
    RolloutTable > .rollout-table--dim {
        color: $text-muted;
    }
    """

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "cursor_page(-1)", "Page up", show=False),
        Binding("pagedown", "cursor_page(1)", "Page down", show=False),
        Binding("home,g", "cursor_edge(0)", "First", show=False),
        Binding("end,G", "cursor_edge(1)", "Last", show=False),
    ]

    class CursorMoved(Message):
        """The cursor is on another rollout (or on none)."""

        def __init__(self, rollout_id: str | None) -> None:
            super().__init__()
            self.rollout_id = rollout_id

    class Chosen(Message):
        """Enter on a rollout: show its details."""

        def __init__(self, rollout_id: str) -> None:
            super().__init__()
            self.rollout_id = rollout_id

    def __init__(
        self, board: RolloutBoard, *, clock: Clock = time.monotonic, **kwargs: object
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.board = board
        self.clock = clock
        self.order: list[str] = []
        self._position: dict[str, int] = {}
        self._strips: dict[str, Strip] = {}
        self.cursor_id: str | None = None
        self.marks: set[str] = set()
        self.filter_text = ""
        self.filter_statuses: frozenset[str] | None = None
        self.stuck_only = False
        self.sort = "submitted"
        self._styles: dict[str, Style] = {}

    # -- data ------------------------------------------------------------------------------

    def rebuild(self) -> None:
        """Recompute which rollouts show and in what order; keeps the cursor on its rollout."""
        now = self.clock()
        records = self.board.select(
            text=self.filter_text or None,
            statuses=self.filter_statuses,
            stuck_only=self.stuck_only,
            now=now,
        )
        if self.sort != "submitted":
            records.sort(key=self._sort_key(now))
        self.order = [record.rollout_id for record in records]
        self._position = {rollout_id: index for index, rollout_id in enumerate(self.order)}
        self.virtual_size = Size(TABLE_WIDTH, len(self.order))
        self._follow_cursor()
        self.refresh()

    def _sort_key(self, now: float) -> Callable[[RolloutRecord], tuple[float, ...]]:
        if self.sort == "row":
            return lambda r: (r.row_index if r.row_index is not None else -1, r.run_index or 0)
        if self.sort == "status":
            return lambda r: (_STATUS_RANK.get(r.display_status, 9), r.submitted_at)
        if self.sort == "phase_time":
            return lambda r: (-(now - r.phase_started_at) if r.in_flight else 0.0, r.submitted_at)
        return lambda r: (
            r.latest_result.sample.reward
            if r.latest_result
            and r.latest_result.sample
            and r.latest_result.sample.reward is not None
            else float("inf"),
            r.submitted_at,
        )

    @property
    def order_depends_on_changes(self) -> bool:
        """Whether a changed rollout can move or appear/disappear (then rebuild, not patch)."""
        return (
            self.sort in ("status", "phase_time", "reward")
            or self.filter_statuses is not None
            or self.stuck_only
            or bool(self.filter_text)
        )

    def apply_changes(self, changed: Iterable[str], added: Iterable[str]) -> None:
        """Take a change batch from the board: patch in place when the order cannot change."""
        changed = set(changed)
        for rollout_id in changed:
            self._strips.pop(rollout_id, None)
        added = list(added)
        if self.order_depends_on_changes:
            self.rebuild()
            return
        for rollout_id in added:
            if rollout_id not in self._position:
                self._position[rollout_id] = len(self.order)
                self.order.append(rollout_id)
        if added:
            self.virtual_size = Size(TABLE_WIDTH, len(self.order))
            if self.cursor_id is None:
                self._follow_cursor()
        self._refresh_rows(changed | set(added))

    def tick(self) -> None:
        """Once a second: times and stuck flags of visible in-flight rollouts move on."""
        visible = self._visible_ids()
        moving = {rid for rid in visible if (r := self.board.records.get(rid)) and r.in_flight}
        for rollout_id in moving:
            self._strips.pop(rollout_id, None)
        if self.sort == "phase_time" or self.stuck_only:
            self.rebuild()
        else:
            self._refresh_rows(moving)

    def _visible_ids(self) -> list[str]:
        top = int(self.scroll_offset.y)
        return self.order[top : top + self.size.height]

    def _refresh_rows(self, rollout_ids: set[str]) -> None:
        top = int(self.scroll_offset.y)
        height = self.size.height
        for rollout_id in rollout_ids:
            index = self._position.get(rollout_id)
            if index is not None and top <= index < top + height:
                self.refresh_line(index - top)

    def refresh_line(self, y: int) -> None:
        """Repaint one visible line (y relative to the top of the widget)."""
        self.refresh_lines(int(self.scroll_offset.y) + y, 1)

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
            for rid in (previous, rollout_id):
                if rid is not None:
                    self._refresh_rows({rid})
            self.post_message(self.CursorMoved(rollout_id))

    def move_cursor_to(self, rollout_id: str) -> None:
        if rollout_id in self._position:
            self._set_cursor(rollout_id)
            self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        index = self.cursor_index
        if index is None:
            return
        top, height = int(self.scroll_offset.y), max(self.size.height, 1)
        if index < top:
            self.scroll_to(y=index, animate=False)
        elif index >= top + height:
            self.scroll_to(y=index - height + 1, animate=False)

    def action_cursor(self, delta: int) -> None:
        if not self.order:
            return
        index = self.cursor_index or 0
        target = min(max(index + delta, 0), len(self.order) - 1)
        self._set_cursor(self.order[target])
        self._scroll_to_cursor()

    def action_cursor_page(self, direction: int) -> None:
        self.action_cursor(direction * max(self.size.height - 1, 1))

    def action_cursor_edge(self, end: int) -> None:
        if self.order:
            self._set_cursor(self.order[-1 if end else 0])
            self._scroll_to_cursor()

    def key_enter(self) -> None:
        if self.cursor_id is not None:
            self.post_message(self.Chosen(self.cursor_id))

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

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_offset.y) + y
        width = self.size.width
        base = self.rich_style
        if index >= len(self.order):
            return Strip.blank(width, base)
        rollout_id = self.order[index]
        strip = self._strips.get(rollout_id)
        if strip is None:
            record = self.board.records.get(rollout_id)
            if record is None:
                return Strip.blank(width, base)
            strip = self._strips[rollout_id] = self._render_row(record, base)
        strip = strip.crop_extend(0, width, base)
        if rollout_id == self.cursor_id:
            strip = strip.apply_style(self.get_component_rich_style("rollout-table--cursor"))
        return strip

    def _render_row(self, record: RolloutRecord, base: Style) -> Strip:
        now = self.clock()
        style = self._style
        dim = self.get_component_rich_style("rollout-table--dim", partial=True)
        marked = record.rollout_id in self.marks
        result = record.latest_result
        status = record.display_status
        segments: list[Segment] = []

        def add(text: str, column: Column, cell_style: Style | None = None) -> None:
            segments.append(Segment(_cell(text, column.width, column.align), cell_style))

        columns = iter(COLUMNS)
        add("▌" if marked else "", next(columns), style("bold yellow"))
        add("-" if record.row_index is None else str(record.row_index), next(columns))
        add("-" if record.run_index is None else str(record.run_index), next(columns), dim)
        add(_clean(record.rollout_id[:10]), next(columns), dim)
        status_label = status.replace("_", " ")
        if record.cancelling:
            status_label = "cancelling…"
        add(status_label, next(columns), style(STATUS_STYLES.get(status, "")))
        track_column = next(columns)
        for position, (glyph, glyph_style) in enumerate(phase_cells(record)):
            if position:
                segments.append(Segment(CONNECTOR[0], style(CONNECTOR[1])))
            segments.append(Segment(glyph, style(glyph_style)))
        segments.append(Segment(" " * (track_column.width - 7)))
        in_phase = None if record.finished or record.untracked else now - record.phase_started_at
        add(duration(in_phase), next(columns))
        end = record.terminal_at if record.terminal_at is not None else now
        add(duration(end - record.submitted_at), next(columns), dim)
        sample_reward = result.sample.reward if result and result.sample else None
        add(reward(sample_reward), next(columns))
        error = ""
        if record.admission_error is not None:
            error = "not admitted"
        elif result is not None and result.err_category is not None:
            error = result.err_category.value
        elif result is not None and result.err_message:
            error = _clean(result.err_message)
        add(error, next(columns), style("red"))
        add(", ".join(self._flags(record, now)), next(columns), style("yellow"))
        strip = Strip(segments).apply_style(base)
        if marked:
            strip = strip.apply_style(self.get_component_rich_style("rollout-table--marked"))
        return strip

    def _flags(self, record: RolloutRecord, now: float) -> list[str]:
        flags = []
        if self.board.is_stuck(record, now):
            flags.append("stuck")
        if record.untracked:
            flags.append("untracked")
        for cancel in record.cancels[-1:]:
            flags.append(cancel.disposition or ("cancel failed" if cancel.error else "cancelling"))
        if record.poll_error and not record.finished:
            flags.append("poll trouble")
        elif record.poll_retries:
            flags.append(f"{record.poll_retries} retries")
        return flags
