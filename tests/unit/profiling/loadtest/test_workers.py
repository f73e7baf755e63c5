"""``--workers N``: how a tier is shared by N client processes, how their outcomes and part
files come back together, and the bad inputs (exit 2 before the first tier)."""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest

from tests.support.cli import run_cli
from trtbench.profiling.loadtest.driver.workers import concat_parts, worker_parts
from trtbench.profiling.loadtest.records.outcome import LoadResult, TierOutcome
from trtbench.profiling.loadtest.records.record_sink import RecordFiles
from trtbench.profiling.loadtest.workload.partition import WorkerShare, merge_results
from trtbench.profiling.loadtest.workload.schedule import send_offsets_ns
from trtbench.triton_repo.ports import free_port

# --- partition: hand-worked ----------------------------------------------------------


def test_five_slots_over_two_workers_are_three_and_two():
    a, b = WorkerShare(0, 2), WorkerShare(1, 2)
    assert list(a.slots(5)) == [0, 2, 4]
    assert list(b.slots(5)) == [1, 3]


def test_slot_counts_follow_c_div_n_plus_remainder():
    for c in range(1, 12):
        for n in range(1, c + 1):
            got = [len(WorkerShare(k, n).slots(c)) for k in range(n)]
            assert got == [c // n + (k < c % n) for k in range(n)]


def test_indexes_are_strided_when_n_divides_c():
    # c = 4, N = 2: worker 0 sends 0, 2, 4, …; worker 1 sends 1, 3, 5, …
    assert list(islice(WorkerShare(0, 2).closed_indexes(4), 5)) == [0, 2, 4, 6, 8]
    assert list(islice(WorkerShare(1, 2).closed_indexes(4), 5)) == [1, 3, 5, 7, 9]


def test_indexes_follow_the_slot_owner_when_n_does_not_divide_c():
    # c = 5, N = 2: index i belongs to the owner of slot i mod 5 (0, 2, 4 | 1, 3)
    assert list(islice(WorkerShare(0, 2).closed_indexes(5), 6)) == [0, 2, 4, 5, 7, 9]
    assert list(islice(WorkerShare(1, 2).closed_indexes(5), 4)) == [1, 3, 6, 8]


@pytest.mark.parametrize(
    ("n_req", "c", "n"), [(10, 5, 2), (32, 4, 2), (7, 3, 3), (1, 4, 4), (33, 8, 3)]
)
def test_every_index_is_sent_exactly_once(n_req, c, n):
    sent = []
    for k in range(n):
        share = WorkerShare(k, n)
        count = share.closed_requests(n_req, c)
        sent += list(islice(share.closed_indexes(c), count))
    assert sorted(sent) == list(range(n_req))


def test_request_counts_are_proportional_to_slots():
    # 10 requests over c = 5: each slot sends 2, so 3 slots send 6 and 2 slots send 4
    assert WorkerShare(0, 2).closed_requests(10, 5) == 6
    assert WorkerShare(1, 2).closed_requests(10, 5) == 4
    assert WorkerShare(0, 2).closed_requests(None, 5) is None  # duration: no count


def test_open_loop_rate_indexes_and_counts():
    a, b = WorkerShare(0, 2), WorkerShare(1, 2)
    assert a.open_rate(10.0) == 5.0 and b.open_rate(10.0) == 5.0
    assert [b.open_index(j) for j in range(3)] == [1, 3, 5]
    assert a.open_requests(7) == 4 and b.open_requests(7) == 3
    assert a.open_requests(None) is None


def test_constant_arrivals_interleave_into_the_one_process_schedule():
    rate, n = 4.0, 2
    sends = []
    for k in range(n):
        share = WorkerShare(k, n)
        start = share.open_start_ns(rate, "constant")
        offsets = send_offsets_ns(
            3, share.open_rate(rate), "constant", share.open_rng(0)
        )
        sends += [(share.open_index(j), start + int(o)) for j, o in enumerate(offsets)]
    # one process at 4/s sends request i at i/4 s
    assert sorted(sends) == [(i, i * 250_000_000) for i in range(6)]
    assert WorkerShare(1, 2).open_start_ns(rate, "poisson") == 0


def test_workers_draw_different_streams_and_one_worker_the_old_one():
    one = WorkerShare(0, 1).open_rng(7).exponential(size=3)
    assert np.array_equal(one, np.random.default_rng(7).exponential(size=3))
    a = WorkerShare(0, 2).open_rng(7).exponential(size=3)
    b = WorkerShare(1, 2).open_rng(7).exponential(size=3)
    assert not np.array_equal(a, b)


def test_a_share_outside_the_workers_is_refused():
    with pytest.raises(ValueError, match="worker 2 of 2"):
        WorkerShare(2, 2)


# --- merging outcomes ------------------------------------------------------------------


def tier(label, status="complete", requests=0, failed=0, unfinished=0, reason=""):
    return TierOutcome(label, status, requests, failed, unfinished, reason)


def test_counts_are_summed_per_tier():
    a = LoadResult([tier("c2", requests=5, failed=1), tier("c4", requests=8)])
    b = LoadResult([tier("c2", requests=4), tier("c4", requests=7, failed=2)])
    merged = merge_results([a, b])
    assert [(t.tier, t.requests, t.failed, t.status) for t in merged.tiers] == [
        ("c2", 9, 1, "complete"),
        ("c4", 15, 2, "complete"),
    ]


def test_an_interrupted_worker_makes_the_tier_interrupted():
    a = LoadResult([tier("c2", requests=5)])
    b = LoadResult(
        [tier("c2", "interrupted", 3, unfinished=2, reason="stopped by SIGINT")],
        stop_signal=2,
    )
    merged = merge_results([a, b])
    assert merged.stop_signal == 2
    t = merged.tiers[0]
    assert (t.status, t.requests, t.unfinished) == ("interrupted", 8, 2)
    assert t.reason == "stopped by SIGINT"


def test_a_server_failure_makes_the_tier_partial_and_the_later_ones_missing():
    a = LoadResult([tier("c2", requests=4), tier("c4", requests=1)])
    b = LoadResult(
        [tier("c2", requests=4), tier("c4", "partial", 2, 1, reason="server died")],
        server_failure="server died",
    )
    merged = merge_results([a, b])
    assert [t.status for t in merged.tiers] == ["complete", "partial"]
    assert merged.tiers[1].reason == "server died" and merged.tiers[1].requests == 3


def test_a_failure_the_parent_saw_settles_the_running_pass():
    a = LoadResult([tier("c2", requests=4), tier("c4", requests=3)])
    merged = merge_results(
        [a], server_failure="client worker 1 exited with code -9", failed_tier=1
    )
    assert [t.status for t in merged.tiers] == ["complete", "partial"]
    assert merged.tiers[1].reason == "client worker 1 exited with code -9"


def test_the_parent_stop_signal_is_kept():
    merged = merge_results([LoadResult([tier("c2", requests=1)])], stop_signal=15)
    assert merged.stop_signal == 15 and merged.interrupted


# --- part files ------------------------------------------------------------------------


def test_worker_parts_sit_beside_the_files_and_are_concatenated(tmp_path):
    files = RecordFiles(
        tmp_path / "v1.2.requests.csv", tmp_path / "v1.2.responses.csv", None
    )
    parts = worker_parts(files, 2)
    assert parts[1].requests == tmp_path / "v1.2.w1.requests.csv"
    assert parts[0].responses == tmp_path / "v1.2.w0.responses.csv"
    assert parts[0].outputs is None
    parts[0].requests.write_text("a,b\n1,2\n")
    parts[1].requests.write_text("a,b\n3,4\n5,6\n")
    parts[0].responses.write_text("x\n")  # header only: no rows
    concat_parts(parts, files)
    assert files.requests.read_text() == "a,b\n1,2\n3,4\n5,6\n"
    assert files.responses.read_text() == "x\n"
    assert not parts[0].requests.exists() and not parts[1].requests.exists()


# --- bad input through the CLI (nothing listens at --url: checked before connecting) ---


def fails_before_connecting(capsys, tmp_path, *args) -> str:
    out = tmp_path / "out"
    code, _, err = run_cli(
        ["loadtest", "--url", f"127.0.0.1:{free_port()}", "--out", out, *args], capsys
    )
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trtbench: error: "), err
    assert "cannot reach" not in err
    return lines[0]


def test_more_workers_than_the_smallest_concurrency(capsys, tmp_path):
    err = fails_before_connecting(
        capsys, tmp_path, "--concurrency", "8,2,4", "--workers", "3"
    )
    assert "--workers 3 is larger than the concurrency of tier c2" in err
    assert "use --workers 2 or less" in err


def test_zero_workers(capsys, tmp_path):
    err = fails_before_connecting(capsys, tmp_path, "--workers", "0")
    assert "--workers" in err and "greater than or equal to 1" in err


def test_workers_equal_to_the_concurrency_pass_preflight(capsys, tmp_path):
    code, _, err = run_cli(
        [
            "loadtest",
            "--url",
            f"127.0.0.1:{free_port()}",
            "--out",
            tmp_path / "o",
            "--concurrency",
            "2,4",
            "--workers",
            "2",
        ],
        capsys,
    )
    assert code == 2 and "cannot reach" in err  # got as far as connecting


def test_request_rate_tiers_take_any_number_of_workers(capsys, tmp_path):
    code, _, err = run_cli(
        [
            "loadtest",
            "--url",
            f"127.0.0.1:{free_port()}",
            "--out",
            tmp_path / "o",
            "--request-rate",
            "2",
            "--workers",
            "4",
        ],
        capsys,
    )
    assert code == 2 and "cannot reach" in err


def test_merged_workers_and_passes_keep_the_worst_event_loop_lag():
    from trtbench.profiling.loadtest.records.loop_lag import LagStats
    from trtbench.profiling.loadtest.records.outcome import LoadResult, TierOutcome
    from trtbench.profiling.loadtest.workload.partition import merge_results
    from trtbench.profiling.loadtest.workload.repeats import merge_passes

    calm, busy = LagStats(0.2, 1.0, 3.0, 100), LagStats(0.1, 7.5, 40.0, 50)
    a = LoadResult(tiers=[TierOutcome("c2", requests=4, loop_lag=calm)])
    b = LoadResult(tiers=[TierOutcome("c2", requests=3, loop_lag=busy)])
    lag = merge_results([a, b]).tiers[0].loop_lag
    # worst of each figure: p50 max(0.2, 0.1), p99 max(1.0, 7.5), max max(3, 40); 150 samples
    assert (lag.p50_ms, lag.p99_ms, lag.max_ms, lag.samples) == (0.2, 7.5, 40.0, 150)
    passes = merge_passes(
        [TierOutcome("c2", loop_lag=busy), TierOutcome("c2", loop_lag=calm)]
    )
    assert passes[0].loop_lag.p99_ms == 7.5 and passes[0].loop_lag.samples == 150


def test_client_cpu_adds_up_over_client_processes_and_passes():
    from trtbench.profiling.loadtest.records.outcome import LoadResult, TierOutcome
    from trtbench.profiling.loadtest.workload.partition import merge_results
    from trtbench.profiling.loadtest.workload.repeats import merge_passes

    a = LoadResult(tiers=[TierOutcome("c2", requests=4, client_cpu_s=1.25)])
    b = LoadResult(tiers=[TierOutcome("c2", requests=3, client_cpu_s=0.5)])
    assert merge_results([a, b]).tiers[0].client_cpu_s == 1.75
    unmeasured = LoadResult(tiers=[TierOutcome("c2", requests=3)])
    assert merge_results([unmeasured]).tiers[0].client_cpu_s is None
    assert merge_results([a, unmeasured]).tiers[0].client_cpu_s == 1.25
    passes = merge_passes(
        [TierOutcome("c2", client_cpu_s=2.0), TierOutcome("c2", client_cpu_s=0.25)]
    )
    assert passes[0].client_cpu_s == 2.25
