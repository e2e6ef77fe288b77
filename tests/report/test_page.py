"""The report's page, drawn from real run folders: its timeline says what the run's
`RunTimeline` says, its table holds every rollout, its failures their messages and
conversations, and no text from the run reaches it as markup."""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

from core.eval.report.page import POLICY, render_report
from core.eval.report.rows_table import MAX_ROWS, rows_table
from core.eval.report.run_report import RunReport
from core.eval.report.timeline_svg import COLUMNS, window
from core.eval.timing.distributions import METRICS
from tests.report.runs import DEMO_ROWS, HOSTILE, HOSTILE_ERROR
from tui.commands.report import report_of
from tui.sources.replay import ReplaySource

#: Every element the page is made of.
PAGE_TAGS = {
    *("html", "head", "meta", "title", "style", "body", "main", "header", "section", "h1"),
    *("h2", "h3", "p", "dl", "div", "dt", "dd", "figure", "ul", "ol", "li", "span", "pre"),
    *("details", "summary", "table", "caption", "thead", "tbody", "tr", "th", "td"),
    *("svg", "g", "rect", "path", "line", "text"),
}


class Elements(HTMLParser):
    """Every start tag of a page, with its attributes, and the page's text."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def having(self, tag: str, **wanted: str) -> list[dict[str, str]]:
        """The attributes of each `tag` whose attributes include `wanted` (`class_` for
        class: one of its words)."""
        found = []
        for name, attrs in self.tags:
            if name != tag:
                continue
            classes = attrs.get("class", "").split()
            if all(
                (value in classes) if key == "class_" else attrs.get(key) == value
                for key, value in wanted.items()
            ):
                found.append(attrs)
        return found


def drawn(folder: Path) -> tuple[RunReport, str, Elements]:
    report = report_of(ReplaySource(folder))
    page = render_report(report)
    return report, page, Elements(page)


def test_the_timeline_counts_what_the_run_timeline_counts(demo_folder: Path) -> None:
    report, _page, elements = drawn(demo_folder)
    timeline = report.timeline
    # Every rollout that left the flight is on the rail once, under its outcome.
    on_rail: Counter[str] = Counter()
    for rect in elements.having("rect", class_="outcome"):
        on_rail[rect["data-outcome"]] += int(rect["data-count"])
    ended = Counter(span.outcome for span in timeline.spans.values() if span.end is not None)
    assert on_rail == ended
    assert sum(on_rail.values()) == DEMO_ROWS
    assert on_rail["failure"] == 2 and on_rail["success"] == DEMO_ROWS - 2
    # The band's peak is the most rollouts ever in flight at once (at some rollout's start).
    band = elements.having("g", class_="band")[0]
    most = max(timeline.count_at(span.start) for span in timeline.spans.values())
    assert int(band["data-peak"]) == most == max(timeline.peaks(*window(timeline), COLUMNS))
    # A lane per server the run used, and the rail's columns never more than fixed.
    assert [lane["data-lane"] for lane in elements.having("g", class_="lane")] == (timeline.lanes())
    assert len({rect["x"] for rect in elements.having("rect", class_="outcome")}) <= COLUMNS


def test_the_table_holds_every_rollout_failures_first(demo_folder: Path) -> None:
    report, page, elements = drawn(demo_folder)
    table = elements.having("table", id="rows")[0]
    assert int(table["data-rows"]) == len(report.records) == DEMO_ROWS
    assert table["data-left-out"] == "0"
    rows = [row["data-rollout"] for row in elements.having("tr") if "data-rollout" in row]
    assert sorted(rows) == sorted(record.rollout_id for record in report.records)
    failed = {r.rollout_id for r in report.records if r.display_status == "failure"}
    assert len(failed) == 2 and set(rows[:2]) == failed
    # Each rollout's server: the URL it was sent to (its first transitions line says it).
    servers = {record.server for record in report.records}
    assert servers and all("://" in server for server in servers)
    assert all(page.count(f"<td>{server}</td>") for server in servers)


def test_failures_are_listed_with_their_messages(demo_folder: Path) -> None:
    report, page, elements = drawn(demo_folder)
    listed = [item["data-rollout"] for item in elements.having("li", class_="failure")]
    failed = [r for r in report.records if r.display_status == "failure"]
    assert sorted(listed) == sorted(record.rollout_id for record in failed)
    # The demo's failures failed at the model: the page says what the model call answered.
    assert page.count("The stub model failed on purpose (injected fault).") >= 2
    assert "HTTP 502" in page


def test_a_failure_shows_its_conversation(hostile_folder: Path) -> None:
    _report, _page, elements = drawn(hostile_folder)
    # Rows 2 and 3 failed; each has the trajectory its server left.
    items = elements.having("li", class_="failure")
    assert [item["data-rollout"] for item in items] == ["hostile-2-0", "hostile-3-0"]
    text = "".join(elements.text)
    assert "from the trajectory its server left" in text
    assert "question 2: <script>" in text and "an answer" in text
    assert "AgentError" in text


def test_no_text_from_the_run_is_markup(hostile_folder: Path) -> None:
    _report, page, elements = drawn(hostile_folder)
    assert "<script" not in page.lower()
    assert "<img" not in page.lower()
    # Only the page's own elements, and no attribute that loads or runs anything.
    assert {tag for tag, _attrs in elements.tags} <= PAGE_TAGS
    assert not [name for _tag, a in elements.tags for name in a if name in ("src", "href")]
    assert not [name for _tag, a in elements.tags for name in a if name.startswith("on")]
    assert "\u202e" not in page
    # Escaped, the text is still all there (the override replaced, as on the dashboard).
    shown = HOSTILE_ERROR.replace("\u202e", "\ufffd")
    assert shown in "".join(elements.text)
    assert HOSTILE.replace("\u202e", "\ufffd") in "".join(elements.text)


def test_the_page_may_fetch_nothing(demo_folder: Path) -> None:
    _report, _page, elements = drawn(demo_folder)
    policies = elements.having("meta", **{"http-equiv": "Content-Security-Policy"})
    assert [meta["content"] for meta in policies] == [POLICY]
    assert POLICY.startswith("default-src 'none';")
    # Nothing on the page names another resource.
    assert not [a for _tag, a in elements.tags if "src" in a or "href" in a]
    assert not elements.having("script") and not elements.having("link")


def test_every_distribution_has_its_card(demo_folder: Path) -> None:
    _report, page, elements = drawn(demo_folder)
    cards = elements.having("div", class_="card")
    assert [card["data-metric"] for card in cards] == [metric.key for metric in METRICS]
    total = next(card for card in cards if card["data-metric"] == "total")
    assert total["data-count"] == str(DEMO_ROWS)
    bars = sum(int(bar["data-count"]) for bar in _bars_of(page, "total"))
    assert bars == DEMO_ROWS


def _bars_of(page: str, metric: str) -> list[dict[str, str]]:
    card = re.search(rf'<div class="card" data-metric="{metric}".*?</div>', page, re.S)
    assert card is not None
    return Elements(card.group(0)).having("rect", class_="bar")


def test_a_big_table_is_cut_and_says_so(demo_folder: Path) -> None:
    report, _page, _elements = drawn(demo_folder)
    many = list(report.records) * (MAX_ROWS // DEMO_ROWS + 1)
    table = Elements(rows_table(many, report.zero, report.timeline)).having("table", id="rows")[0]
    assert int(table["data-rows"]) == MAX_ROWS
    assert int(table["data-left-out"]) == len(many) - MAX_ROWS


def test_every_text_goes_through_the_record_s_redactor(hostile_folder: Path) -> None:
    # A run's board masks its secrets (a live run's does; a replay's has none to mask): the
    # page shows only what the redactor leaves, in the table, the failures and the
    # conversations alike.
    report = report_of(ReplaySource(hostile_folder))
    for record in report.records:
        record.redact = lambda text: text.replace("Boom", "***").replace("question", "***")
    page = render_report(report)
    assert "Boom" not in page and "question" not in page
    assert page.count("***") >= 3  # the error in the table and in the list, a conversation
