"""rounds.csv held to summary.csv's round counts and run.json's design.order (hand-made
frames: which file is damaged, and how, is known)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from trtbench.core.errors import DataFileError
from trtbench.profiling.report.rounds_check import check_rounds

PATH = Path("run/loadtest/rounds.csv")
ORDER = [[r, t, v] for r in range(3) for t in ("c1", "c2") for v in ("base", "ngram")]
RUN = {"design": {"order": ORDER}}


def rounds(cells) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "round": r,
                "tier": t,
                "variant": v,
                "output_tokens_per_s": 100.0,
                "request_count": 4,
                "error_count": 0,
            }
            for r, t, v in cells
        ]
    )


def summary(count: int = 3) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"variant": v, "tier": t, "repeats_count": count}
            for t in ("c1", "c2")
            for v in ("base", "ngram")
        ]
    )


def test_a_whole_file_passes():
    check_rounds(rounds(ORDER), summary(), RUN, PATH)
    check_rounds(None, summary(), RUN, PATH)  # absent: nothing to hold


def test_a_file_cut_at_a_line_boundary_is_refused_naming_the_pair():
    cut = [c for c in ORDER if not (c[0] == 2 and c[1] == "c1" and c[2] == "ngram")]
    with pytest.raises(
        DataFileError, match="2 row.s. of ngram c1, but summary.csv counts 3"
    ):
        check_rounds(rounds(cut), summary(), RUN, PATH)


def test_a_row_the_order_never_planned_is_refused():
    extra = [*ORDER, [3, "c1", "ngram"]]
    with pytest.raises(DataFileError, match="first: round 3 c1 ngram"):
        check_rounds(rounds(extra), summary(), RUN, PATH)


def test_rows_of_a_variant_outside_the_order_and_unmeasured_passes_are_fine():
    # a later `trtbench loadtest --out RUN` added "other"; a pass without a measured
    # request has its row but is not counted by summary.csv (repeats_count 2 of 3 rows)
    later = [*ORDER, [0, "c1", "other"]]
    check_rounds(rounds(later), summary(2), RUN, PATH)
    check_rounds(rounds(ORDER), summary(), {}, PATH)  # no design recorded


def test_a_renamed_figure_column_is_refused_not_warned(tmp_path):
    # the comparisons pair output_tokens_per_s: a file without it cannot be read back
    from trtbench.core.data_files import read_csv_checked
    from trtbench.core.export import write_csv
    from trtbench.profiling.loadtest.files.rounds_table import ROUNDS_SCHEMA

    frame = rounds(ORDER).assign(
        **{
            c.name: 1.0
            for c in ROUNDS_SCHEMA
            if c.name not in ("variant", "tier", "round", "output_tokens_per_s")
        }
    )
    path = tmp_path / "rounds.csv"
    write_csv(frame, path, ROUNDS_SCHEMA)
    text = path.read_text().replace("output_tokens_per_s", "output_tok_s", 1)
    path.write_text(text)
    with pytest.raises(DataFileError, match="output_tokens_per_s"):
        read_csv_checked(path, ROUNDS_SCHEMA, fix="x", keys=("variant", "tier"))


def test_a_cell_with_two_rows_is_refused_naming_its_line():
    frame = pd.concat([rounds(ORDER), rounds([[2, "c1", "ngram"]])], ignore_index=True)
    # 12 cells on lines 2-13, the second row of round 2 c1 ngram on line 14
    with pytest.raises(
        DataFileError, match=r"rounds.csv:14: round 2 c1 ngram has a second row"
    ):
        check_rounds(frame, summary(), RUN, PATH)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 0.0, -50.0])
def test_a_lost_or_edited_figure_is_refused_not_dropped(value):
    # a figure the pairs need: dropping its round would leave 2 pairs and no interval
    frame = rounds(ORDER)
    frame.loc[5, "output_tokens_per_s"] = value
    with pytest.raises(
        DataFileError, match=r"rounds.csv:7: column output_tokens_per_s"
    ):
        check_rounds(frame, summary(), RUN, PATH)


def test_a_cell_where_every_request_failed_may_have_no_figure():
    frame = rounds(ORDER)
    frame.loc[5, ["output_tokens_per_s", "error_count"]] = [float("nan"), 4]
    check_rounds(frame, summary(), RUN, PATH)


def test_an_unmeasured_pass_of_a_settled_tier_is_not_a_claim():
    # a race settled c2 before round 3: the pass rows it writes anyway hold no request
    extra = rounds([*ORDER, [3, "c2", "ngram"]])
    extra.loc[len(extra) - 1, ["request_count", "output_tokens_per_s"]] = [
        0,
        float("nan"),
    ]
    check_rounds(extra, summary(), RUN, PATH)
