"""rounds.csv and summary.csv's interference columns (``profiling/loadtest/files/rounds_table.py``)
from hand-made pass rows and cell timings.

The run: variants base and draft, tiers c1 and c4, two rounds; a medusa cell ran too (its
passes are not in this table, a variant re-run on its own) and takes a place in the order.
Start times in seconds after t0 = 1 s on the monotonic clock, in the order they ran:

    position  start  cell              duration  others' CPU share   flagged
    0          0.0   draft c4 round 0  1.5       0.02, 1 GPU process yes (GPU)
    1          2.0   base  c4 round 0  1.5       0.10 (= the limit)  no (not above)
    2          4.0   medusa c1 round 0 1.0       0.50                (no pass row)
    3          5.0   base  c1 round 0  2.0       0.03                no
    4          7.0   draft c1 round 0  2.0       0.03                no
    5         10.0   draft c1 round 1  2.5       not measured (NaN)  no
    6         12.5   base  c1 round 1  2.0       0.25                yes
    7         15.0   base  c4 round 1  1.0       0.03                no
    8         19.0   draft c4 round 1  1.0       0.03                no

The wall clock of the first cell is 1_700_000_000 s = 2023-11-14 22:13:20 UTC; each later
cell's label adds its start (e.g. 12.5 s -> 22:13:32.500).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from trtbench.profiling.loadtest.files.rounds_table import (
    ROUNDS_SCHEMA,
    CellTiming,
    interference_summary,
    interference_warnings,
    rounds_table,
)
from trtbench.profiling.loadtest.records.host_load import OTHER_SHARE_LIMIT, HostLoad

T0_NS = 1_000_000_000
UNIX0 = 1_700_000_000.0
NCPU = 2


def load(share: float, gpu: int | None = None) -> HostLoad:
    """A 2-core host where others took ``share`` of it: other cores = 2 * share, ours 1."""
    other = NCPU * share
    return HostLoad(
        1.0,
        1.0 + other,
        1.0,
        other,
        share,
        NCPU,
        gpu,
        None if gpu is None else gpu * 2**30,
        "proc" if gpu is None else "proc+nvml",
    )


NAN_LOAD = HostLoad(*[math.nan] * 5, 0, None, None, "unavailable")

# (variant, tier, round, start s, duration s, host load), in the order they ran
RAN = [
    ("draft", "c4", 0, 0.0, 1.5, load(0.02, gpu=1)),
    ("base", "c4", 0, 2.0, 1.5, load(OTHER_SHARE_LIMIT)),
    ("medusa", "c1", 0, 4.0, 1.0, load(0.50)),
    ("base", "c1", 0, 5.0, 2.0, load(0.03)),
    ("draft", "c1", 0, 7.0, 2.0, load(0.03)),
    ("draft", "c1", 1, 10.0, 2.5, NAN_LOAD),
    ("base", "c1", 1, 12.5, 2.0, load(0.25)),
    ("base", "c4", 1, 15.0, 1.0, load(0.03)),
    ("draft", "c4", 1, 19.0, 1.0, load(0.03)),
]


def timing(v: str, t: str, r: int, start: float, dur: float, h: HostLoad) -> CellTiming:
    start_ns = T0_NS + round(start * 1e9)
    return CellTiming(v, t, r, start_ns, start_ns + round(dur * 1e9), UNIX0 + start, h)


CELLS = [timing(*row) for row in RAN]
SHUFFLED = [
    CELLS[i] for i in (5, 0, 8, 2, 7, 1, 4, 6, 3)
]  # hooks' order must not matter


def tok_s(v: str, t: str, r: int) -> float:
    """A figure that names its cell: base 100, draft 200; c4 adds 40; round adds r."""
    return {"base": 100.0, "draft": 200.0}[v] + (40.0 if t == "c4" else 0.0) + r


def passes_frame() -> pd.DataFrame:
    """Per-pass summary rows (``trusted_summary.per_pass``), in no particular order."""
    rows = []
    for v in ("draft", "base"):
        for t in ("c1", "c4"):
            for r in (1, 0):
                rows.append(
                    {
                        "variant": v,
                        "tier": t,
                        "repeat": r,
                        "request_count": 10 + r,
                        "error_count": 0,
                        "time_to_first_token_p50_ms": 5.0 * (r + 1),
                        "output_token_throughput_tokens_per_s": tok_s(v, t, r),
                        "tier_status": "complete",  # not a rounds.csv column
                    }
                )
    return pd.DataFrame(rows)


def test_rows_in_run_order_with_timing_and_figures():
    got = rounds_table(passes_frame(), SHUFFLED)
    expected = [(v, t, r) for v, t, r, *_ in RAN if v != "medusa"]
    assert list(zip(got["variant"], got["tier"], got["round"], strict=True)) == expected
    # places over every cell of the run, medusa's (2) included
    assert got["position"].tolist() == [0, 1, 3, 4, 5, 6, 7, 8]
    assert got["start_s"].tolist() == pytest.approx(
        [0.0, 2.0, 5.0, 7.0, 10.0, 12.5, 15.0, 19.0]
    )
    assert got["duration_s"].tolist() == pytest.approx(
        [1.5, 1.5, 2.0, 2.0, 2.5, 2.0, 1.0, 1.0]
    )
    assert got["started_at"].iloc[0] == "2023-11-14T22:13:20.000+00:00"
    assert got["started_at"].iloc[5] == "2023-11-14T22:13:32.500+00:00"
    # figures renamed to rounds.csv's names, each from its own pass
    assert got["output_tokens_per_s"].tolist() == [
        tok_s(v, t, r) for v, t, r in expected
    ]
    assert got["ttft_p50_ms"].tolist() == [5.0 * (r + 1) for _, _, r in expected]
    assert got["request_count"].tolist() == [10 + r for _, _, r in expected]
    assert "tier_status" not in got and "repeat" not in got
    # columns in schema order; those of figures the passes lack are left out
    names = [c.name for c in ROUNDS_SCHEMA]
    assert list(got.columns) == [n for n in names if n in got.columns]
    assert "tpot_mean_ms" not in got and "request_goodput_per_s" not in got


def test_host_load_and_flag_per_cell():
    got = rounds_table(passes_frame(), SHUFFLED).set_index(["variant", "tier", "round"])
    share = got["host_other_cpu_share"]
    assert share[("base", "c1", 1)] == pytest.approx(0.25)
    assert share[("base", "c4", 0)] == pytest.approx(0.10)
    assert math.isnan(share[("draft", "c1", 1)])
    assert got.loc[("base", "c1", 1), "host_other_cpu_cores"] == pytest.approx(0.5)
    assert got.loc[("base", "c1", 1), "own_cpu_cores"] == pytest.approx(1.0)
    assert got.loc[("base", "c1", 1), "host_busy_cores"] == pytest.approx(1.5)
    assert got.loc[("draft", "c4", 0), "gpu_other_processes"] == 1
    assert got.loc[("draft", "c4", 0), "gpu_other_used_bytes"] == 2**30
    assert got.loc[("draft", "c4", 0), "host_load_source"] == "proc+nvml"
    assert got.loc[("draft", "c1", 1), "host_load_source"] == "unavailable"
    flagged = {k for k, f in got["interference_flag"].items() if f}
    # above the share limit, or another process on a GPU; exactly at the limit is not
    assert flagged == {("base", "c1", 1), ("draft", "c4", 0)}


def test_a_pass_without_timing_comes_last_and_no_timings_at_all():
    some = rounds_table(passes_frame(), [c for c in CELLS if c.variant != "draft"])
    # timed: base c4 r0 (2 s), medusa (4 s), base c1 r0 (5 s), base c1 r1 (12.5 s),
    # base c4 r1 (15 s): base's places 0, 2, 3, 4 of five; then draft's untimed passes
    assert list(zip(some["variant"], some["tier"], some["round"], strict=True))[:4] == [
        ("base", "c4", 0),
        ("base", "c1", 0),
        ("base", "c1", 1),
        ("base", "c4", 1),
    ]
    assert some["position"].tolist()[:4] == [0, 2, 3, 4]
    assert some["start_s"].tolist()[:4] == pytest.approx([0.0, 3.0, 10.5, 13.0])
    assert set(some["variant"].iloc[4:]) == {"draft"}
    assert some["position"].iloc[4:].isna().all()

    bare = rounds_table(passes_frame(), [])  # ``trtbench loadtest``: no host figures
    assert len(bare) == 8 and bare["position"].isna().all()
    assert sorted(zip(bare["variant"], bare["tier"], bare["round"], strict=True)) == [
        (v, t, r) for v in ("base", "draft") for t in ("c1", "c4") for r in (0, 1)
    ]
    by_cell = bare.set_index(["variant", "tier", "round"])["output_tokens_per_s"]
    assert by_cell[("draft", "c4", 1)] == tok_s("draft", "c4", 1)
    assert "interference_flag" not in bare or not bare["interference_flag"].any()


def test_a_pass_that_never_ran_has_no_row():
    # A race stopped measuring draft at c4 after round 0: its round-1 pass there is empty
    # (no request, no cell timing) and has no row. A pass that ran but sent nothing (its
    # server gone: a timing, 0 requests) keeps its row, and so does an untimed pass with
    # requests (``trtbench loadtest``).
    passes = passes_frame()
    empty = (passes["variant"] == "draft") & (passes["tier"] == "c4")
    empty &= passes["repeat"] == 1
    figures = ["request_count", "output_token_throughput_tokens_per_s"]
    passes.loc[empty, figures] = [0, None]
    ran = [c for c in CELLS if (c.variant, c.tier, c.round) != ("draft", "c4", 1)]
    got = rounds_table(passes, ran)
    keys = set(zip(got["variant"], got["tier"], got["round"], strict=True))
    assert len(got) == 7 and ("draft", "c4", 1) not in keys
    silent = passes.copy()
    silent.loc[empty, "request_count"] = 0
    kept = rounds_table(silent, CELLS).set_index(["variant", "tier", "round"])
    assert len(kept) == 8 and kept.loc[("draft", "c4", 1), "request_count"] == 0
    assert len(rounds_table(passes_frame(), [])) == 8


def test_no_passes_give_an_empty_table_with_every_column():
    got = rounds_table(pd.DataFrame(), CELLS)
    assert got.empty
    assert list(got.columns) == [c.name for c in ROUNDS_SCHEMA]


SUMMARY = pd.DataFrame(
    {
        "variant": ["base", "base", "draft", "draft", "medusa"],
        "tier": ["c1", "c4", "c1", "c4", "c1"],
        "repeats_count": [2, 2, 2, 2, 1],
        "output_tokens_per_s": [1.0, 2.0, 3.0, 4.0, 5.0],
    }
)


def test_interference_summary_per_tier():
    """From the table above: base c1 max(0.03, 0.25) = 0.25, 1 flagged round; base c4
    max(0.10, 0.03) = 0.10, none (0.10 is not above the limit); draft c1 max(0.03, NaN) =
    0.03, none; draft c4 max(0.02, 0.03) = 0.03, 1 (the GPU); medusa c1 has no rows here:
    NaN, 0, no flag."""
    rounds = rounds_table(passes_frame(), CELLS)
    out = interference_summary(SUMMARY, rounds)
    assert out[list(SUMMARY.columns)].equals(SUMMARY)  # the summary as it was, plus …
    share = out["host_other_cpu_share_max"].tolist()
    assert share[:4] == pytest.approx([0.25, 0.10, 0.03, 0.03])
    assert math.isnan(share[4])
    assert out["interference_rounds"].tolist() == [1, 0, 0, 1, 0]
    assert out["interference_flag"].tolist() == [True, False, False, True, False]


def test_interference_summary_without_host_figures():
    bare = rounds_table(passes_frame(), [])
    out = interference_summary(SUMMARY, bare)
    assert out["host_other_cpu_share_max"].isna().all()
    assert out["interference_rounds"].tolist() == [0] * 5
    assert not out["interference_flag"].any()


def test_interference_warnings_name_variant_tier_rounds_and_share():
    rounds = rounds_table(passes_frame(), CELLS)
    lines = interference_warnings(interference_summary(SUMMARY, rounds))
    assert len(lines) == 2
    base, draft = lines
    assert base.startswith("base: ")
    assert "c1 (1 of 2 rounds, others up to 25% of the host)" in base
    assert "c4" not in base  # base c4 was at the limit, not above it
    assert draft.startswith("draft: ")
    assert "c4 (1 of 2 rounds, others up to 3% of the host)" in draft
    assert "c1" not in draft


def test_interference_warnings_one_line_per_variant():
    summary = pd.DataFrame(
        {
            "variant": ["a", "a", "b"],
            "tier": ["c1", "c8", "c1"],
            "host_other_cpu_share_max": [0.4, 0.125, 0.05],
            "interference_rounds": [3, 1, 0],
            "interference_flag": [True, True, False],
        }
    )
    lines = interference_warnings(summary)
    assert len(lines) == 1
    # no repeats_count column: the rounds are not known
    assert "c1 (3 of ? rounds, others up to 40% of the host)" in lines[0]
    assert "c8 (1 of ? rounds, others up to 12% of the host)" in lines[0]
    assert lines[0].startswith("a: ")


def test_no_interference_no_warning():
    assert interference_warnings(SUMMARY) == []  # no flag column
    clean = SUMMARY.assign(
        interference_flag=False, interference_rounds=0, host_other_cpu_share_max=0.01
    )
    assert interference_warnings(clean) == []
