"""report.md's lines on the measurement design and interference
(``profiling/report/design_section.py``), from hand-written run.json and rounds.csv rows."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from trtbench.profiling.loadtest.workload.design import DESIGN_TEXT
from trtbench.profiling.report.design_section import (
    design_lines,
    interference_lines,
    whole_run_interference,
)


def after_colon(design: str) -> str:
    """DESIGN_TEXT's sentence without its leading ``<name>:``."""
    return DESIGN_TEXT[design].split(":", 1)[1].strip()


def test_interleaved_design_names_rounds_starts_and_co_residence():
    run = {
        "design": {
            "name": "interleaved",
            "rounds": 5,
            "co_resident": True,
            "server_starts": 3,
            "asked": "auto",
        }
    }
    lines = design_lines(run, None)
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith("Measurement design: **interleaved**, 5 round(s), ")
    assert "3 server start(s), servers co-resident" in line
    assert after_colon("interleaved") in line
    assert "Every interval in this report is over these rounds." in line


def test_rounds_design_one_server_at_a_time():
    run = {
        "design": {
            "name": "rounds",
            "rounds": 3,
            "co_resident": False,
            "server_starts": 6,
        }
    }
    (line,) = design_lines(run, None)
    assert "**rounds**, 3 round(s), 6 server start(s), one server at a time" in line
    assert after_colon("rounds") in line


def test_sequential_design_says_its_intervals_leave_out_drift():
    run = {
        "design": {
            "name": "sequential",
            "rounds": 3,
            "co_resident": False,
            "server_starts": 2,
        }
    }
    (line,) = design_lines(run, None)
    assert "**sequential**, 3 round(s), 2 server start(s), one server at a time" in line
    assert "do NOT include drift" in line


def test_no_design_recorded_reads_as_sequential():
    for run in ({}, {"design": None}, {"design": "interleaved"}):  # not a mapping
        (line,) = design_lines(run, None)
        assert line.startswith("Measurement design: not recorded")
        assert after_colon("sequential") in line
        assert "**" not in line


def test_server_starts_unknown_reads_as_a_question_mark():
    (line,) = design_lines({"design": {"name": "interleaved", "rounds": 2}}, None)
    assert "2 round(s), ? server start(s), one server at a time" in line


def rounds_rows(cells: list[tuple[str, str, int, float, object]]) -> pd.DataFrame:
    return pd.DataFrame(
        cells,
        columns=[
            "variant",
            "tier",
            "round",
            "host_other_cpu_share",
            "interference_flag",
        ],
    )


# 6 cells; draft c1 flagged in rounds 0 and 1 (named once), base c4 in round 1 (GPU)
FLAGGED = [
    ("base", "c1", 0, 0.02, False),
    ("draft", "c1", 0, 0.30, True),
    ("base", "c4", 0, 0.05, False),
    ("draft", "c1", 1, 0.15, True),
    ("base", "c4", 1, 0.01, True),
    ("draft", "c4", 1, 0.04, False),
]


@pytest.mark.parametrize("as_text", [False, True])  # in memory, or read back from CSV
def test_flagged_cells_are_counted_and_named(as_text):
    rows = rounds_rows(
        [(v, t, r, s, str(f) if as_text else f) for v, t, r, s, f in FLAGGED]
    )
    (line,) = interference_lines(rows)
    assert line.startswith("**Interference: 3 of 6 cells were measured")
    assert "more than 10% of the host's CPU (up to 30%)" in line
    assert "`draft` c1, `base` c4." in line
    assert line.count("`draft` c1") == 1
    assert "`draft` c4" not in line and "`base` c1" not in line


def test_no_flagged_cell_states_the_largest_share():
    rows = rounds_rows(
        [
            ("base", "c1", 0, 0.02, False),
            ("draft", "c1", 0, 0.08, False),
            ("base", "c1", 1, math.nan, False),
        ]
    )
    (line,) = interference_lines(rows)
    assert line.startswith("Interference: none seen")
    assert "at most 8% of the host's CPU" in line
    assert "flag above 10%" in line


def test_interference_not_measured_or_absent():
    unmeasured = rounds_rows(
        [("base", "c1", 0, math.nan, False), ("draft", "c1", 0, math.nan, False)]
    )
    assert interference_lines(unmeasured) == [
        "Interference: not measured (no /proc on the host)."
    ]
    assert interference_lines(None) == []
    assert interference_lines(rounds_rows([])) == []
    figures_only = pd.DataFrame({"variant": ["a"], "tier": ["c1"], "round": [0]})
    assert interference_lines(figures_only) == []


def test_design_lines_append_the_interference_line():
    run = {
        "design": {
            "name": "interleaved",
            "rounds": 2,
            "co_resident": True,
            "server_starts": 2,
        }
    }
    lines = design_lines(run, rounds_rows(FLAGGED))
    assert len(lines) == 2
    assert lines[0].startswith("Measurement design: **interleaved**")
    assert lines[1].startswith("**Interference: 3 of 6 cells")


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("fixed", "Output lengths: **fixed** (min tokens = max tokens"),
        ("natural", "Output lengths: **natural** (`loadtest.fixed_output_len: false`)"),
    ],
)
def test_the_output_length_choice_is_said(kind, says):
    run = {"design": {"name": "interleaved", "rounds": 1, "output_length": kind}}
    lines = design_lines(run, None)
    assert [line for line in lines if line.startswith("Output lengths")] == [
        line for line in lines if says in line
    ]
    assert sum("Output lengths" in line for line in lines) == 1


def test_a_run_that_did_not_record_it_says_nothing_about_output_lengths():
    run = {"design": {"name": "interleaved", "rounds": 1}}
    assert not any("Output lengths" in line for line in design_lines(run, None))


def test_a_race_states_the_rounds_it_ran_not_its_budget():
    """rounds: auto with a budget of 8 that stopped after 3 (design.stopping): the report's
    intervals are over 3 rounds, and the design line says 3."""
    run = {
        "design": {
            "name": "interleaved",
            "rounds": 8,
            "server_starts": 5,
            "stopping": {
                "max_rounds": 8,
                "rounds_run": 3,
                "stopped_because": "max_minutes",
            },
        }
    }
    (line,) = design_lines(run, None)
    assert line.startswith(
        "Measurement design: **interleaved**, 3 round(s) (rounds: auto, up to 8, "
        "stopped: max_minutes), 5 server start(s)"
    )
    run["design"]["stopping"]["max_minutes"] = 2.5  # the time budget, when there is one
    (line,) = design_lines(run, None)
    assert "(rounds: auto, up to 8 or 2.5 min, stopped: max_minutes)" in line


def test_interference_on_every_variant_and_tier_is_one_sentence():
    """Every (variant, tier) flagged in some round: no list of cells; the one sentence says
    how many cells and the largest share (3 of 4 cells, up to 30 %)."""
    rows = rounds_rows(
        [
            ("base", "c1", 0, 0.20, True),
            ("base", "c1", 1, 0.05, False),
            ("draft", "c1", 0, 0.30, True),
            ("draft", "c1", 1, 0.25, True),
        ]
    )
    assert interference_lines(rows) == []
    said = whole_run_interference(rows)
    assert said.startswith(
        "**3 of this run's 4 cells, in every (variant, tier), ran while"
    )
    assert "(up to 30%)" in said
    rows["interference_flag"] = True
    assert whole_run_interference(rows).startswith(
        "**Every cell of this run (4 of 4: variant × tier × round)"
    )
    assert whole_run_interference(rounds_rows(FLAGGED)) is None  # base c1 never flagged


@pytest.mark.parametrize(
    "instance, words",
    [
        (None, "recorded before intervals carried a server-instance term"),
        (
            {"sd": 0.036, "restart_every": None},
            "narrower than about ±7.1%",
        ),  # 1.96 * 3.6
        ({"sd": 0.036, "restart_every": 3}, "fresh servers every 3 round(s)"),
        ({"sd": 0, "restart_every": None}, "no server-instance term"),
    ],
)
def test_the_instance_term_is_stated_with_the_design(instance, words):
    design = {"name": "interleaved", "rounds": 6, "server_starts": 2}
    if instance is not None:
        design["instance"] = instance
    (line,) = design_lines({"design": design}, None)
    assert words in line
    if instance is not None and instance["sd"]:
        assert "instance SD 3.6%" in line


def test_server_starts_count_fresh_blocks():
    from trtbench.profiling.loadtest.workload.design import server_starts

    assert server_starts("interleaved", 5, 12) == 5
    assert server_starts("interleaved", 5, 12, 3) == 20  # 4 blocks of 3
    assert server_starts("interleaved", 5, 13, 3) == 25  # the 13th round: a 5th block
    assert server_starts("rounds", 5, 4) == 20


def test_a_race_with_fresh_servers_states_its_starts_as_a_bound():
    design = {
        "name": "interleaved",
        "rounds": 12,
        "server_starts": 20,
        "stopping": {
            "rounds_run": 3,
            "max_rounds": 12,
            "stopped_because": "max_minutes",
        },
        "instance": {"sd": 0.036, "restart_every": 3},
    }
    (line,) = design_lines({"design": design}, None)
    assert "up to 20 server start(s)" in line
    design["instance"] = {"sd": 0.036, "restart_every": None}
    (line,) = design_lines({"design": design}, None)
    assert ", 20 server start(s)" in line
