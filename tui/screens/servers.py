"""`V`: the servers panel over the dashboard: one line per rollout server the run drives (or, in
a replay, the servers its rollouts name), with what an operator watches on a fleet: its state,
rollouts in flight, admitted and admitted a second lately, 429s, rollouts not admitted,
failures by category, capacity, its /health latency, its restarts and its last error; and
`d`, to drain a server (no new work item is sent there; what is in flight finishes) or
undrain it.

What the run did with each server comes from the board's records (`core.eval.servers.account`),
so it reads the same live, attached and replayed; what only the server's client knows (its
capacity, 429s and /health latency) comes with the source's servers. The dashboard's repaint
timer calls `repaint` while the panel is open; the cursor stays on its server through it.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Static

from core.board import NOT_ADMITTED_CATEGORY, RolloutBoard
from core.eval.servers.account import ServerAccount, server_accounts
from tui.sources.base import DashboardSource, ServerView
from tui.widgets.format import one_line, plain
from tui.widgets.summary import SERVER_DOTS

COLUMNS = (
    ("server", "server"),
    ("state", "state"),
    ("in flight", "in_flight"),
    ("admitted", "admitted"),
    ("/s", "rate"),
    ("429s", "busy"),
    ("refused", "refused"),
    ("failures", "failures"),
    ("cap", "capacity"),
    ("health", "health"),
    ("restarts", "restarts"),
    ("last error", "error"),
)
#: The most of a server's last error the panel shows (the header and logs.txt have it whole).
ERROR_CELLS = 60


def failures_text(account: ServerAccount) -> str:
    """Failures by category, the most first ("agent_error 3, timeout 1"); not admitted ones
    have their own column."""
    failures = [
        (category, count)
        for category, count in account.failures.most_common()
        if category != NOT_ADMITTED_CATEGORY
    ]
    return ", ".join(f"{category} {count}" for category, count in failures) or "-"


def server_cells(view: ServerView | None, url: str, account: ServerAccount) -> list[Text | str]:
    """One server's line: `view` is what the source says of it (None: only its rollouts name
    it, as in a replay)."""
    state = "-" if view is None else view.state
    dot, style = SERVER_DOTS.get(state, ("○", "dim"))
    detail = None if view is None else view.detail
    return [
        plain(url.removeprefix("http://")),
        Text.assemble((dot, style), " ", (state, style)),
        str(account.in_flight),
        str(account.admitted),
        f"{account.admitted_per_sec:.1f}",
        "-" if view is None else str(view.busy),
        str(account.not_admitted),
        plain(failures_text(account)),
        "-" if view is None or view.capacity is None else str(view.capacity),
        "-" if view is None or view.health_ms is None else f"{view.health_ms:.0f}ms",
        "-" if view is None else str(view.restarts),
        plain(one_line(detail)[:ERROR_CELLS], "red") if detail else "-",
    ]


class ServersScreen(ModalScreen[None]):
    """The servers of the run shown (see the module docstring)."""

    DEFAULT_CSS = """
    ServersScreen {
        background: $background;
    }
    ServersScreen #servers-title {
        height: 1;
        padding: 0 1;
        background: $panel;
        text-style: bold;
    }
    ServersScreen DataTable {
        height: 1fr;
    }
    """
    BINDINGS = [
        Binding("escape,V", "close", "Back", tooltip="Back to the table", id="servers.close"),
        Binding(
            "d",
            "drain",
            "Drain/undrain",
            tooltip="Drain the server (no new work item is sent there), or undrain it",
            id="servers.drain",
        ),
        Binding(
            "question_mark,f1",
            "app.help",
            "Help",
            tooltip="All keys and the phase track legend",
            id="servers.help",
        ),
        Binding("q", "app.quit_dashboard", "Quit", tooltip="Quit the dashboard", id="servers.quit"),
    ]

    def __init__(
        self,
        source: DashboardSource,
        board: RolloutBoard,
        now: Callable[[], float],
        on_drain: Callable[[ServerView], None],
    ) -> None:
        """`board` is the board shown, `now` the dashboard's clock; `on_drain(server)` drains
        or undrains it (the dashboard's control flow, which says what became of it)."""
        super().__init__()
        self.source = source
        self.board = board
        self._now = now
        self._on_drain = on_drain
        self._title = Static(id="servers-title")
        self.table: DataTable[Text | str] = DataTable(cursor_type="row", zebra_stripes=True)
        self._views: dict[str, ServerView] = {}
        self._lines: list[tuple[str, list[Text | str]]] = []

    def compose(self) -> ComposeResult:
        yield self._title
        yield self.table
        yield Footer(compact=True)

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.table.add_column(label, key=key)
        self.repaint()
        self.table.focus()

    def repaint(self) -> None:
        """Catch up with the run (the dashboard's repaint timer calls this); the lines are
        drawn again only when one of them changed."""
        if not self.table.ordered_columns:
            return  # pushed, not mounted yet: its mount draws it
        # Not the start-up's steps, which stand in the servers' place while they start.
        views = {view.url: view for view in self.source.servers() if not view.step}
        self._views = views
        accounts = server_accounts(self.board.records.values(), self._now())
        # A watch's rollouts name their server by its events' server_id, not its URL.
        for view in views.values():
            if view.server_id is not None and view.server_id in accounts:
                accounts[view.url] = accounts.pop(view.server_id)
        urls = list(views) + [url for url in accounts if url and url not in views]
        lines = [
            (url, server_cells(views.get(url), url, accounts.get(url) or ServerAccount()))
            for url in urls
        ]
        if lines == self._lines:
            return
        self._lines = lines
        table = self.table
        cursor = self.cursor_url()
        table.clear()
        for url, cells in lines:
            table.add_row(*cells, key=url)
        if cursor in urls:
            table.move_cursor(row=urls.index(cursor), animate=False)
        self._title.update(self._title_text(list(views.values()), len(urls)))
        self.refresh_bindings()

    def on_data_table_row_highlighted(self) -> None:
        self.refresh_bindings()  # `d` applies to some servers only

    def _title_text(self, views: list[ServerView], shown: int) -> Text:
        states = {state: sum(view.state == state for view in views) for state in SERVER_DOTS}
        text = Text(f"servers · {shown}", no_wrap=True, overflow="ellipsis")
        for state, count in states.items():
            if count:
                text.append(f" · {count} {state}", SERVER_DOTS[state][1])
        if not views and shown:
            text.append(" · as this recording's rollouts name them", "dim")
        return text

    def cursor_url(self) -> str | None:
        table = self.table
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return key if isinstance(key, str) else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "drain":
            # A server the run drives now, of a run that takes steering (a watch sends
            # nothing anywhere: there is nothing to drain).
            source = self.source
            return not (source.read_only or source.is_watch) and self.cursor_url() in self._views
        return True

    def action_drain(self) -> None:
        view = self._views.get(self.cursor_url() or "")
        if view is not None:
            self._on_drain(view)

    def action_close(self) -> None:
        self.dismiss(None)
