"""No sentence of report.md contradicts another (issue 51): rendered from a hand-made run whose
output tok/s and TPOT ratios disagree (``tests/support/report_runs.py``) and from a real run
(``tests/data/demo_run``), the report is read back as text and every claim is held to the
interval printed beside it, or to the tables it summarises.

* A ratio cell ``1.27x [1.22, 1.31], significantly better`` (comparison matrix, per-tier
  table, variant against variant): significantly better needs a printed low end ≥ 1,
  significantly worse a high end ≤ 1, not significant and equivalent an interval holding 1
  (equivalent: within ±m too).
* A margin cell ``+26.7 % [+22.4, +31.2], significant`` (the Recommendation): the same in
  percent, around 0; undecided is not significant.
* The answer's "significant at c2, c4" equals the tiers where the Recommendation's table
  calls the winner's margin significant, and the per-tier table calls its ratio
  significantly better; "at none of those tiers" means there are none.
* A crossover line's "significantly better at …" names exactly the tiers the per-tier table
  calls that variant significantly better at.
* The note "N of M ratios over the baseline are not significant" counts the per-tier table.
* By prompt category, a winner marked ``(n.s.)`` has a TPOT speedup interval reaching 1,
  an unmarked one an interval above it.
* A line that says "better" by point value, and says so, claims no significance.
* Any other line using these words is a legend that defines them; a line that is none of
  these fails the test, so a new unchecked claim cannot slip in.
"""

from __future__ import annotations

import re

import pytest

from tests.support.report_runs import copy_real_run, make_split_run
from trtbench.pipeline.report import write_report

NUM = r"(\d+\.\d+)"
PCT = r"([+-]\d+\.\d)"
RATIO_CLAIM = re.compile(
    rf"{NUM}x \[{NUM}, {NUM}\], (significantly better|significantly worse|not significant"
    r"|equivalent \(±([\d.]+) %\))"
)
MARGIN_CLAIM = re.compile(
    rf"{PCT} % \[{PCT}, {PCT}\](?: over `[^`]+`)?, (significantly worse|significant"
    r"|equivalent within ±([\d.]+) %|not significant|undecided)"
)
WORDS = re.compile(r"significant|better|worse|equivalent", re.I)
LEGENDS = (
    "Objective: ",  # the Recommendation's legend
    "'",  # a column's legend: 'output tok/s vs baseline': …
    "Each cell: ",
    "Criterion: ",  # the follow-up check's
    "Speedups ",
    "Acceptance rate at each draft position",
    "Each tier's requests split by their prompt's category",
)


def check_claim(m: re.Match, one: float, scale: float) -> None:
    """A cell's verdict ``m[4]`` against its printed interval ``m[2]``, ``m[3]`` around
    ``one`` (1 for a ratio, 0 for a change in %; ``scale``: 1 or 100); ``m[5]``: the
    equivalence margin in %, whose band is [1 / (1 + m), 1 + m] as a ratio."""
    low, high, word = float(m[2]), float(m[3]), m[4]
    if word in ("significantly better", "significant"):
        assert low >= one, m[0]
    elif word == "significantly worse":
        assert high <= one, m[0]
    else:  # not significant, undecided, equivalent: the interval holds no difference
        assert low <= one <= high, m[0]
    if m[5]:
        band, slack = float(m[5]) / 100, 0.005 if scale == 1 else 0.05  # printed digits
        edges = ((1 / (1 + band) - 1) * scale + one, band * scale + one)
        assert low >= edges[0] - slack and high <= edges[1] + slack, m[0]


def tier_list(text: str) -> set[str]:
    return set() if text in ("none", "no tier") else set(text.split(", "))


def table(text: str, heading: str) -> tuple[list[str], list[list[str]]]:
    """The header and body rows of the first table after ``heading``, cells stripped."""
    lines = text.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        if not line.startswith("|---"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows[0], rows[1:]


def per_tier_claims(text: str) -> dict[tuple[str, str], str]:
    """(variant, tier) → the verdict of its objective ratio in the per-tier table ('' for
    a cell without an interval)."""
    head, rows = table(text, "### Per tier")
    col = head.index("output tok/s vs baseline")
    return {
        (r[0], r[1]): (m[4] if (m := RATIO_CLAIM.search(r[col])) else "") for r in rows
    }


def _verdict(cell: str) -> str:
    m = MARGIN_CLAIM.search(cell)
    return m[4] if m else ""


def check_category_winners(text: str) -> None:
    """Each tier's winner row of "By prompt category": ``(n.s.)`` exactly where the
    winner's TPOT speedup interval reaches down to 1 (``1.72× [0.86, 4.50]``)."""
    if "### By prompt category" not in text:
        return
    part = text.split("### By prompt category", 1)[1].split("\n### ", 1)[0]
    for tier in re.findall(r"^#### (\S+)$", part, re.M):
        head, rows = table(part, f"#### {tier}\n")
        cells = {r[0]: r for r in rows}
        for j, won in enumerate(cells["winner"][1:], start=1):
            name = re.match(r"`([^`]+)`", won)
            if name is None:  # the baseline or nobody: no interval claimed
                continue
            low = float(re.search(rf"× \[{NUM}, {NUM}\]", cells[f"`{name[1]}`"][j])[1])
            if low != 1.0:
                assert won.endswith("(n.s.)") == (low < 1.0), (tier, head[j], won)


def check_report(text: str) -> None:
    check_category_winners(text)
    lines = text.splitlines()
    claims = per_tier_claims(text)
    answer = next(line for line in lines if line.startswith("**Serve"))
    winner = re.search(r"Serve `([^`]+)`", answer)[1]
    _, rec_rows = table(text, "## Recommendation")
    won = {r[0] for r in rec_rows if r[1] == f"`{winner}`"}
    rec_sure = {
        r[0] for r in rec_rows if r[0] in won and _verdict(r[3]) == "significant"
    }
    table_sure = {
        t for (v, t), w in claims.items() if v == winner and w.endswith("better")
    }
    assert rec_sure == table_sure & won
    for line in lines:
        rest = line
        for m in RATIO_CLAIM.finditer(line):
            check_claim(m, 1.0, 1.0)
        for m in MARGIN_CLAIM.finditer(line):
            check_claim(m, 0.0, 100.0)
        rest = MARGIN_CLAIM.sub("", RATIO_CLAIM.sub("", rest))
        rest = re.sub(r"undecided[^|]*could not be told apart", "", rest)
        if not WORDS.search(rest):
            continue
        if line.startswith("**Serve"):
            if said := re.search(r"significant at (.+?) \(of the", line):
                assert tier_list(said[1]) == rec_sure, line
            else:
                assert "at none of those tiers is its margin" in line and not rec_sure
        elif crossover := re.match(
            r"- `([^`]+)`: .*significantly better at (.+?)[;.]", line
        ):
            variant, tiers = crossover[1], tier_list(crossover[2])
            sure = {
                t
                for (v, t), w in claims.items()
                if v == variant and w.endswith("better")
            }
            assert tiers == sure, line
        elif counted := re.match(
            r"- (\d+) of (\d+) ratios over the baseline are not", line
        ):
            shown = [w for w in claims.values() if w]
            held = [w for w in shown if w == "not significant"]
            assert (int(counted[1]), int(counted[2])) == (len(held), len(shown)), line
        elif "point value" in rest and not re.search("significant", rest, re.I):
            continue  # better by point value, said so: no significance claimed
        else:
            assert line.startswith(LEGENDS), f"an unchecked claim: {line}"


@pytest.fixture(params=["hand-made", "real"])
def report(request, tmp_path):
    make = make_split_run if request.param == "hand-made" else copy_real_run
    return write_report(make(tmp_path / "run")).report_path.read_text()


def test_every_claim_agrees_with_its_interval_and_the_tables(report):
    check_report(report)


def test_the_checks_see_a_contradiction(report):
    """The check fails a report whose cell says significant over an interval holding 1,
    and one whose crossover line names a tier the table does not call significant."""
    bad = report.replace(", not significant", ", significantly better", 1)
    with pytest.raises(AssertionError):
        check_report(bad)
    lying = re.sub(
        r"significantly better at (no tier|[^;.]+)",
        "significantly better at c8",
        report,
        count=1,
    )
    with pytest.raises(AssertionError):
        check_report(lying)
    unchecked = report.replace(
        "## What limited this run\n", "## What limited this run\n\n- `x` is better.\n"
    )
    with pytest.raises(AssertionError, match="an unchecked claim"):
        check_report(unchecked)
    if "(n.s.)" in report:  # the real run's categories
        with pytest.raises(AssertionError):
            check_report(report.replace(" (n.s.) |", " |", 1))


@pytest.mark.parametrize(
    ("cell", "agrees"),
    [
        ("1.01x [0.97, 1.04], equivalent (±5 %)", True),  # within [0.952, 1.05]
        ("1.01x [0.94, 1.04], equivalent (±5 %)", False),
        ("+1.0 % [-4.8, +4.9], equivalent within ±5 %", True),  # -4.76 printed -4.8
        ("+1.0 % [-6.0, +4.9], equivalent within ±5 %", False),
        ("+2.0 % [-1.0, +5.0], significant", False),
        ("+2.0 % [+1.0, +5.0], significant", True),
    ],
)
def test_an_equivalence_or_margin_cell_is_held_to_its_interval(cell, agrees):
    m = RATIO_CLAIM.search(cell) or MARGIN_CLAIM.search(cell)
    one, scale = (1.0, 1.0) if "x [" in cell else (0.0, 100.0)
    if agrees:
        check_claim(m, one, scale)
    else:
        with pytest.raises(AssertionError):
            check_claim(m, one, scale)


def test_one_speedup_story_on_the_split_run(tmp_path):
    """The objective's paired ratio everywhere; TPOT only by its name.

    ngram over the baseline at c2, output tok/s, rounds 1.25 1.28 1.30 1.24: geometric mean
    exp(mean(ln)) = 1.2672 → 1.27x, and tight: significantly better. Its TPOT ratio (1.50
    0.95 1.30 1.10: 1.195) holds 1; at c8 the TPOT ratio (1.35 … 1.36: 1.37x) is
    significant while output tok/s (0.95 0.80 0.90 1.05: 0.922) is not."""
    text = write_report(make_split_run(tmp_path / "run")).report_path.read_text()
    assert (
        "its margin over the baseline is significant at c2, c4 (of the 2 tiers it wins)"
        in text
    )
    assert (
        "- `ngram`: beats the baseline by point value from the lowest tier up to 4, not at 8; significantly better at c2, c4;"
        in text
    )
    rows = {(r[0], r[1]): r for r in table(text, "### Per tier")[1]}
    assert rows[("ngram", "c2")][11].startswith("1.27x [")
    assert rows[("ngram", "c2")][11].endswith("significantly better")
    assert rows[("ngram", "c2")][12].startswith("1.19x [")  # TPOT, labelled, no claim
    assert rows[("ngram", "c8")][11].startswith("0.92x [")
    assert rows[("ngram", "c8")][11].endswith("not significant")
    assert rows[("ngram", "c8")][12].startswith("1.37x [")
    # the comparison matrix's high tier is the per-tier table's c8 cell
    matrix = {r[0]: r for r in table(text, "## Comparison matrix")[1]}
    assert matrix["ngram"][6] == rows[("ngram", "c8")][11]
    assert "![Speedup (output tok/s vs baseline)" in text


def test_the_answer_comes_first_and_the_rest_in_the_appendix(report):
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Recommendation"
    top = ["## Comparison matrix", "## Plots", "## What limited this run"]
    assert [h for h in headings if h in top] == top
    assert headings[-1].startswith("## Appendix: ")
    assert report.index("](plots/speedup.png)") < report.index("## Appendix: ")
    assert "overlap" not in report  # the pairwise reading is one table
    assert report.count("### Variant against variant") == 1


def test_interference_over_the_whole_run_is_said_once(report):
    """Every cell of both runs was flagged: one sentence, no list of cells or rows."""
    assert report.count("ran while other processes took more than 10%") == 1
    assert "interference: `" not in report  # no per-row names in the evidence column
    assert "**Interference:" not in report  # no per-cell list in the appendix
