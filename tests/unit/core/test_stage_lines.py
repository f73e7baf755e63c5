"""The terminal's progress while a run works: one line per stage, driven here directly with a
scripted clock (no wall-clock bounds). Every expected line is worked out by hand."""

from __future__ import annotations

import io
import re

from rich.console import Console

from trtbench.commands.stage_lines import PLAIN_GAP_S, StageLines, clock_text
from trtbench.pipeline.stages import BUILD, DEPLOY, cell_label, load_test_stage
from trtbench.profiling.loadtest.workload.schedule import Tier

VARIANTS = ("baseline", "draft-k4", "medusa", "ngram-k4", "eagle3-k4")
TIERS = ("c1", "c2", "c4", "c8")


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def plain(clock: Clock) -> tuple[StageLines, io.StringIO]:
    """A progress off a terminal (as in CI or behind a pipe) writing into a buffer."""
    out = io.StringIO()
    progress = StageLines(Console(file=out), clock=clock)
    assert not progress.live
    return progress, out


def shown(out: io.StringIO) -> list[str]:
    """The non-empty lines a terminal keeps of ``out``: each line's text after its last
    carriage return (a live line is redrawn after one), escape sequences dropped."""
    ansi = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
    rows = [ansi.sub("", line).split("\r")[-1] for line in out.getvalue().split("\n")]
    return [row for row in rows if row.strip()]


def fixed_run(progress: StageLines, clock: Clock, rounds: int, cell_s: float) -> int:
    """The stages of an interleaved run with fixed rounds: 5 builds (2 s each), 5 server
    starts (20 s each), then every variant at every tier in every round. Returns the
    cells."""
    progress.start(BUILD, len(VARIANTS), "variant")
    for v in VARIANTS:
        clock.now += 2
        progress.advance(v)
    progress.start(DEPLOY, len(VARIANTS), "server")
    for v in VARIANTS:
        clock.now += 20
        progress.advance(v)
    cells = rounds * len(TIERS) * len(VARIANTS)
    progress.start(load_test_stage(rounds, False), cells, "cell")
    for r in range(rounds):
        for tier in TIERS:
            for v in VARIANTS:
                clock.now += cell_s
                progress.advance(cell_label(v, tier, r))
    progress.stop()
    return cells


def test_off_a_terminal_a_run_prints_about_ten_lines_a_stage_ending_n_of_n():
    assert PLAIN_GAP_S == 30.0  # the hand-worked lines below assume it
    clock = Clock()
    progress, out = plain(clock)
    cells = fixed_run(progress, clock, rounds=3, cell_s=6.0)
    lines = out.getvalue().splitlines()
    load = [line for line in lines if line.startswith("load test")]
    # 60 cells of 6 s: a line at every sixth cell (another tenth, 36 s ≥ 30 s apart),
    # 6 … 54, then the end line: 10 lines, never one per cell.
    assert len(load) == 10 <= 12
    assert load[-1] == f"load test, 3 rounds: {cells} of {cells} cells in 6:00"
    # after 6 cells in 36 s (the 6th: c2's first variant): 6 s a cell × 54 left = 324 s
    assert load[0] == (
        "load test, 3 rounds: cell 6 of 60 · ETA 5:24 · round 1 · c2 baseline · "
        "0:36 elapsed"
    )
    # the builds (2 s each) never reach 30 s between lines: only their end line; the
    # servers (20 s each): server 2 at 40 s and server 4 at 80 s, then the end line
    assert lines[:4] == [
        "build: 5 of 5 variants in 0:10",
        "deploy: server 2 of 5 · ETA 1:00 · draft-k4 · 0:40 elapsed",
        "deploy: server 4 of 5 · ETA 0:20 · ngram-k4 · 1:20 elapsed",
        "deploy: 5 of 5 servers in 1:40",
    ]
    assert len(lines) == 4 + len(load)


def test_rounds_by_need_give_an_upper_bound_and_end_at_the_cells_measured():
    clock = Clock()
    progress, out = plain(clock)
    budget, per_round = 8, 20
    progress.start(load_test_stage(budget, True), budget * per_round, "cell", True)
    done = 0
    for r, active in enumerate((20, 20, 12)):  # the race drops 8 cells after round 2
        for k in range(active):
            clock.now += 2.0
            done += 1
            progress.advance(cell_label(VARIANTS[k % 5], TIERS[k // 5], r))
        # what the pipeline says after each round (measuring.race_bound)
        progress.retotal(done + (budget - r - 1) * active, True)
    progress.retotal(done, False)  # the race is decided after round 3
    progress.stop()
    lines = out.getvalue().splitlines()
    # 16 of ≤ 160 in 32 s: 2 s a cell × 144 left = 288 s, an upper bound
    assert lines[0] == (
        "load test, ≤ 8 rounds: cell 16 of ≤ 160 · ETA ≤ 4:48 · round 1 · c8 baseline · "
        "0:32 elapsed"
    )
    assert (
        len(lines) == 4 <= 12
    )  # cells 16, 32, 48 (each another tenth of 160), the end
    assert all(" · ETA ≤ " in line for line in lines[:-1])
    assert lines[-1] == "load test, ≤ 8 rounds: 52 of 52 cells in 1:44"


def test_a_time_budget_caps_the_eta_at_its_minutes_left():
    # 36 rounds of 20 cells at most, 2 s a cell: by the cells, 16 done leave 704 × 2 s; the
    # race says its minutes end the stage within 100 s of the 16th cell (seconds_left, as
    # measuring passes RacePlan.seconds_left): the ETA reads the smaller, ≤ 1:40, and 10 s
    # later ≤ 1:30 (the budget's clock runs on between cells).
    clock = Clock()
    progress, _ = plain(clock)
    progress.start(load_test_stage(36, True), 720, "cell", True)
    for k in range(16):
        clock.now += 2.0
        progress.advance(cell_label(VARIANTS[k % 5], TIERS[k // 5], 0))
    stage = progress._stage
    assert stage.text(clock.now).split(" · ")[1] == "ETA ≤ 23:28"  # 704 × 2 s
    progress.retotal(720, True, seconds_left=100.0)
    assert stage.text(clock.now).split(" · ")[1] == "ETA ≤ 1:40"
    clock.now += 10.0
    assert stage.text(clock.now).split(" · ")[1] == "ETA ≤ 1:30"
    progress.retotal(720, True)  # no budget: the cells' bound again
    assert stage.text(clock.now).split(" · ")[1] == "ETA ≤ 23:28"
    progress.stop()


def test_a_stage_stopped_before_its_total_says_so():
    clock = Clock()
    progress, out = plain(clock)
    with progress:
        progress.start(load_test_stage(1, False), 20, "cell")
        for k in range(7):
            clock.now += 1.0
            progress.advance(cell_label("medusa", f"c{k}", 0))
    assert out.getvalue().splitlines()[-1] == (
        "load test: 7 of 20 cells in 0:07 (stopped early)"
    )


def test_a_race_planned_during_the_build_leaves_the_build_line_alone():
    # with fresh servers per block the race hands out its first round before the load
    # test's stage starts: its bound (36 rounds x 20 cells) is not the build's total
    clock = Clock()
    progress, out = plain(clock)
    with progress:
        progress.start(BUILD, 5, "variant")
        for k in range(5):
            clock.now += 1.0
            progress.advance(f"v{k}")
        progress.retotal(720, True)
        progress.stop()
    assert out.getvalue().splitlines()[-1] == "build: 5 of 5 variants in 0:05"


def test_trtbench_loadtest_counts_each_tier_pass_as_a_cell():
    clock = Clock()
    progress, out = plain(clock)
    progress.start("load test", 4, "cell")
    labels = []
    for _ in range(2):  # two rounds
        for tier in (Tier(concurrency=1), Tier(concurrency=4)):
            progress.tier_started("m", tier, 8)
            for ok in (True, False):
                progress.request_done(ok)
            clock.now += 40.0
            progress.tier_ended()
            labels.append(out.getvalue().splitlines()[-1])
    progress.stop()
    # a line per pass here: each is a quarter, 40 s after the one before
    assert (
        labels[2] == "load test: cell 3 of 4 · ETA 0:40 · round 2 · c1 m · 2:00 elapsed"
    )
    assert out.getvalue().splitlines()[-1] == "load test: 4 of 4 cells in 2:40"


def test_on_a_terminal_each_stage_leaves_one_line():
    clock = Clock()
    out = io.StringIO()
    progress = StageLines(
        Console(file=out, force_terminal=True, width=120), clock=clock
    )
    assert progress.live
    fixed_run(progress, clock, rounds=2, cell_s=3.0)
    assert shown(out) == [
        "build: 5 of 5 variants in 0:10",
        "deploy: 5 of 5 servers in 1:40",
        "load test, 2 rounds: 40 of 40 cells in 2:00",
    ]


def test_clock_text():
    assert [clock_text(s) for s in (0, 41.4, 725, 3723, -3)] == [
        "0:00",
        "0:41",
        "12:05",
        "1:02:03",
        "0:00",
    ]


def test_a_stage_that_did_nothing_leaves_no_line():
    clock = Clock()
    progress, out = plain(clock)
    progress.start(DEPLOY, 5, "server")
    clock.now += 30.0  # the first server never came up: the error's line says why
    progress.stop()
    assert out.getvalue() == ""
    out = io.StringIO()
    progress = StageLines(Console(file=out, force_terminal=True), clock=clock)
    progress.start(DEPLOY, 5, "server")
    progress.stop()
    assert shown(out) == []
