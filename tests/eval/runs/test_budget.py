"""`--budget` and `--price-per-mtok` over a real run of the demo's server and the stub model
priced by the flag: the run stops (exit 1, resumable) when the spend reaches the budget, a
resume counts what was spent before, and a budget without a price is refused."""

from __future__ import annotations

from pathlib import Path

from tests.eval.runs.command import run_eval
from tests.eval.runs.files import multiply_rows, read_jsonl, run_folder, summary_of, write_jsonl
from tests.eval.runs.servers import ServedDemo

#: With this price a demo row (six prompt tokens, one answer token) costs 0.8 cents.
PRICE = "1000,2000"


def _spent(folder: Path) -> float:
    return sum(float(call.get("cost_usd", 0.0)) for call in read_jsonl(folder / "calls.jsonl"))


def test_the_run_stops_at_its_budget_and_a_resume_counts_what_was_spent(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    rows = 12
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(rows))
    args = (
        "--server",
        demo_server.url,
        "--dataset-file",
        str(dataset),
        "--name",
        "b1",
        "--max-in-flight",
        "1",
        "--price-per-mtok",
        PRICE,
        "--json",
    )
    folder = run_folder(tmp_path, "b1")

    first = run_eval(*args, "--budget", "0.03", cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    spent = _spent(folder)
    assert spent >= 0.03
    ours = summary_of(first.stdout)
    assert ours["spend"]["budget_state"] == "reached"
    assert ours["spend"]["budget_usd"] == 0.03
    assert ours["spend"]["spent_usd"] == spent
    assert ours["spend"]["price_source"] == "--price-per-mtok"
    done_first = len(read_jsonl(folder / "events.jsonl"))
    assert 0 < done_first < rows, "stopped with items pending"
    assert "budget reached" in (folder / "logs.txt").read_text()
    controls = [
        line for line in read_jsonl(folder / "transitions.jsonl") if line.get("kind") == "control"
    ]
    assert any(
        line.get("action") == "budget_reached" and line.get("value") == 3 for line in controls
    )

    # The same budget again (as text): what was spent before has reached it, nothing more is
    # spent, and the resume it says needs a higher budget.
    again = run_eval(*args[:-1], "--budget", "0.03", cwd=tmp_path)
    assert again.returncode == 1, again.stderr
    assert _spent(folder) == spent
    assert len(read_jsonl(folder / "events.jsonl")) == done_first
    said = again.stdout + again.stderr
    assert f"Resume the pending work items with a budget above the ${spent:.4f} spent:" in said
    resume = said.split(" spent: ", 1)[1].splitlines()[0]
    assert resume.endswith("--name b1 --budget USD") and "0.03" not in resume

    # A larger one: the run goes on, counting the spend before, and stops at the new budget.
    more = run_eval(*args, "--budget", "0.06", cwd=tmp_path)
    assert more.returncode == 1, more.stderr
    total = _spent(folder)
    assert 0.06 <= total < 0.06 + 0.01, "one item in flight: at most its call past the budget"
    assert summary_of(more.stdout)["spend"]["spent_usd"] == total
    done_more = len(read_jsonl(folder / "events.jsonl"))
    assert done_first < done_more < rows

    # Without a budget the rest runs; the resume hint carries the price.
    rest = run_eval(*args, cwd=tmp_path)
    assert rest.returncode == 0, rest.stderr
    assert summary_of(rest.stdout)["items"]["done"] == rows


def test_a_budget_without_a_price_and_bad_amounts_are_refused(tmp_path: Path) -> None:
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(2))
    base = ("--dataset-file", str(dataset), "--server", "http://127.0.0.1:9")
    refused = {
        ("--budget", "5"): "--budget: no price is known for osmosis-stub",
        ("--budget", "-1"): "argument --budget: expected a finite amount above 0",
        ("--budget", "ten"): "argument --budget: expected US dollars",
        ("--price-per-mtok", "3"): "argument --price-per-mtok: expected IN,OUT",
        ("--price-per-mtok", "3,x"): "argument --price-per-mtok: expected two numbers",
        ("--price-per-mtok", "3,-1"): "argument --price-per-mtok: expected finite, non-negative",
    }
    for flags, message in refused.items():
        answer = run_eval(*base, *flags, cwd=tmp_path)
        assert answer.returncode == 2, flags
        assert message in answer.stderr, answer.stderr
        assert not (tmp_path / ".osmosis").exists(), "nothing written"
