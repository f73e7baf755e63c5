"""The "By prompt category" section: a method × category table per tier, each category's
winner, and a sentence when the winner differs by category (hand-made categories.csv rows)."""

from __future__ import annotations

import math

import pandas as pd

from tests.support.run_factory import summary_row, write_summary
from trtbench.core.export import write_csv
from trtbench.core.run_dir import RunDir
from trtbench.profiling.loadtest.stats.categories import CATEGORY_SCHEMA
from trtbench.profiling.report.category_section import category_lines, winners
from trtbench.profiling.report.inputs import RUN_CSV_SCHEMAS
from trtbench.profiling.report.run_data import load_run

NAN = math.nan


def rows() -> pd.DataFrame:
    # (variant, tier, category, acceptance length, speedup): n-gram wins code at c1,
    # the draft model wins chat; at c8 nothing beats the baseline on chat.
    data = [
        ("base", "c1", "chat", NAN, NAN),
        ("base", "c1", "code", NAN, NAN),
        ("dt", "c1", "chat", 2.4, 1.30),
        ("dt", "c1", "code", 2.6, 1.40),
        ("ng", "c1", "chat", 1.1, 0.95),
        ("ng", "c1", "code", 3.2, 1.80),
        ("base", "c8", "chat", NAN, NAN),
        ("dt", "c8", "chat", 2.4, 0.90),
        ("ng", "c8", "chat", 1.1, 0.80),
    ]
    frame = pd.DataFrame(
        data,
        columns=[
            "variant",
            "tier",
            "category",
            "acceptance_length_tokens",
            "tpot_speedup_p50_ratio",
        ],
    )
    return frame.assign(
        concurrency=frame["tier"].str[1:].astype(int),
        request_rate_per_s=NAN,
        requests_count=4,
        time_per_output_token_p50_ms=1.0,
        tier_status="complete",
    )


def with_cell(
    frame: pd.DataFrame, variant: str, category: str, **values
) -> pd.DataFrame:
    """``frame`` with ``values`` set in the c1 row of ``variant`` and ``category`` (the
    columns are added, empty elsewhere, when absent)."""
    frame = frame.assign(**{k: frame.get(k, NAN) for k in values})
    at = (
        (frame["variant"] == variant)
        & (frame["tier"] == "c1")
        & (frame["category"] == category)
    )
    frame.loc[at, list(values)] = list(values.values())
    return frame


def test_winner_per_category_and_the_difference_is_said():
    c1 = rows()[rows()["tier"] == "c1"]
    assert winners(c1) == {"chat": "dt", "code": "ng"}
    c8 = rows()[rows()["tier"] == "c8"]
    assert winners(c8) == {"chat": None}
    text = "\n".join(category_lines(rows(), "base"))
    assert "## By prompt category" in text
    assert "| `ng` | 1.10 · 0.95× | 3.20 · 1.80× |" in text
    assert "| winner | `dt` | `ng` |" in text
    assert "The winner differs by category at c1: chat: dt; code: ng." in text
    assert "at c8" not in text  # one category there: nothing differs
    assert "`base`" not in text  # the baseline is the reference, not a row


def test_no_categories_no_section():
    assert category_lines(None, "base") == []
    assert category_lines(rows().iloc[0:0], "base") == []


def test_the_run_reads_categories_csv_back(tmp_path):
    rd = RunDir(tmp_path / "run")
    write_summary(rd.root, [summary_row("base", 1, tpot=2.0, tok_s=100.0)], "base")
    write_csv(rows(), rd.categories_csv, CATEGORY_SCHEMA)
    run = load_run(rd.root, RUN_CSV_SCHEMAS)
    assert run.categories is not None and len(run.categories) == 9
    assert run.categories.loc[5, "acceptance_length_tokens"] == 3.2


def test_the_recommendation_names_the_mix_and_each_categorys_choice():
    from trtbench.profiling.report.category_section import category_advice, category_mix

    frame = rows()
    # the baseline served 4 chat + 4 code requests at c1 and 4 chat at c8: 8 chat of 12
    assert category_mix(frame, "base") == {"chat": 8 / 12, "code": 4 / 12}
    lines, doc = category_advice(frame, "base")
    assert lines[0] == (
        "Made for this mix of prompt categories: chat 67%, code 33% (`loadtest.datasets`)."
    )
    assert "c1: chat → `dt`, code → `ng`" in lines[1]
    assert "c8" not in lines[1]
    assert doc["differs"] is True
    assert doc["winners"] == {"c1": {"chat": "dt", "code": "ng"}, "c8": {"chat": None}}
    assert category_advice(None, "base") == ([], None)


def test_tiers_are_shown_by_load_not_by_file_order():
    frame = pd.concat([rows()[rows()["tier"] == "c8"], rows()[rows()["tier"] == "c1"]])
    text = "\n".join(category_lines(frame, "base"))
    assert text.index("### c1") < text.index("### c8")


def test_a_cell_shows_the_paired_interval_when_there_is_one():
    frame = with_cell(
        rows(),
        "ng",
        "code",
        tpot_speedup_ci95_low_ratio=1.5,
        tpot_speedup_ci95_high_ratio=2.1,
    )
    text = "\n".join(category_lines(frame, "base"))
    assert "| `ng` | 1.10 · 0.95× | 3.20 · 1.80× [1.50, 2.10] |" in text


def test_a_winner_whose_interval_reaches_one_is_marked_not_significant():
    interval = ("tpot_speedup_ci95_low_ratio", "tpot_speedup_ci95_high_ratio")
    frame = with_cell(
        rows(), "dt", "chat", **dict(zip(interval, (0.9, 1.8), strict=True))
    )
    frame = with_cell(
        frame, "ng", "code", **dict(zip(interval, (1.2, 2.4), strict=True))
    )
    text = "\n".join(category_lines(frame, "base"))
    assert "| winner | `dt` (n.s.) | `ng` |" in text


def test_figures_of_a_tier_that_did_not_complete_are_marked_and_never_win():
    """ng's c1 tier is partial: its cells say so and dt wins code there (1.40×, not ng's
    1.80×); the baseline's c8 tier failed: no winner at c8, and the recommendation leaves
    c8 out."""
    from trtbench.profiling.report.category_section import category_advice

    frame = rows().assign(tier_status="complete")
    frame.loc[(frame["variant"] == "ng") & (frame["tier"] == "c1"), "tier_status"] = (
        "partial"
    )
    frame.loc[(frame["variant"] == "base") & (frame["tier"] == "c8"), "tier_status"] = (
        "failed"
    )
    text = "\n".join(category_lines(frame, "base"))
    assert "| `ng` | 1.10 · 0.95× (partial) | 3.20 · 1.80× (partial) |" in text
    assert "| winner | `dt` | `dt` |" in text
    assert "| winner | — (tier not complete) |" in text
    _, doc = category_advice(frame, "base")
    assert doc["winners"] == {"c1": {"chat": "dt", "code": "dt"}}


def test_a_cell_shows_the_request_throughput_speedup_after_the_tpot_one():
    frame = with_cell(rows(), "ng", "code", request_throughput_speedup_p50_ratio=1.65)
    text = "\n".join(category_lines(frame, "base"))
    assert "| `ng` | 1.10 · 0.95× | 3.20 · 1.80× · 1.65× |" in text


def rates() -> pd.DataFrame:
    """category_acceptance.csv rows: ng at c1, K = 2; chat 0.50 then 0.25, code 0.90 then
    0.80 (steps 10 at both positions); one histogram row that the table must ignore."""
    data = [
        ("ng", "c1", "chat", "position", 1, 10, 5),
        ("ng", "c1", "chat", "position", 2, 8, 2),
        ("ng", "c1", "code", "position", 2, 10, 8),  # out of order in the file
        ("ng", "c1", "code", "position", 1, 10, 9),
        ("ng", "c1", "code", "histogram", 0, 10, 1),
    ]
    names = "variant tier category kind draft_position steps_count hits_count"
    frame = pd.DataFrame(data, columns=names.split())
    return frame.assign(
        value_ratio=frame["hits_count"] / frame["steps_count"], source="server_per_step"
    )


def test_per_position_rates_per_category_under_their_tier():
    text = "\n".join(category_lines(rows(), "base", rates()))
    c1, c8 = text.index("### c1"), text.index("### c8")
    at = text.index("| `ng` | 0.50 / 0.25 | 0.90 / 0.80 |")
    assert c1 < at < c8
    assert text.count("Acceptance rate at each draft position") == 1  # said once
    assert "Acceptance rate by draft position at c1" in text
    assert "at c8 (j" not in text  # c8 has no rows


def test_the_run_reads_category_acceptance_csv_back(tmp_path):
    from trtbench.profiling.loadtest.stats.categories import CATEGORY_ACCEPTANCE_SCHEMA

    rd = RunDir(tmp_path / "run")
    write_summary(rd.root, [summary_row("base", 1, tpot=2.0, tok_s=100.0)], "base")
    write_csv(rates(), rd.category_acceptance_csv, CATEGORY_ACCEPTANCE_SCHEMA)
    run = load_run(rd.root, RUN_CSV_SCHEMAS)
    assert run.category_acceptance is not None
    assert list(run.category_acceptance["hits_count"]) == [5, 2, 8, 9, 1]


def test_positions_past_the_last_accepted_one_are_left_out_and_said():
    """A Medusa-like variant of depth 2 proposing 4 nodes: positions 3 and 4 never accept;
    one past the last accepted position (3) is shown, 4 is left out with a note."""
    names = "variant tier category kind draft_position steps_count hits_count"
    data = [
        ("md", "c1", "chat", "position", j, 10, h)
        for j, h in enumerate([6, 3, 0, 0], 1)
    ]
    frame = pd.DataFrame(data, columns=names.split())
    frame = frame.assign(value_ratio=frame["hits_count"] / frame["steps_count"])
    text = "\n".join(category_lines(rows(), "base", frame))
    assert "| `md` | 0.60 / 0.30 / 0.00 |" in text
    assert "are left out for `md`" in text
